package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/adk/session"

	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/store"
)

// What an agent keeps in the store, so a restart is not a way around a
// pause: key "agent.<name>.paused", with who paused it and why, so status
// shows them after a restart or a change of owner. (Its timer is the
// scheduler's.) Records written before by and reason were kept read as a
// pause by nobody known.
type pausedRecord = PauseInfo

func (a *Agent) key(what string) string { return "agent." + a.spec.Name + "." + what }

// ErrNotOwner is returned, and logged, instead of writing the durable
// state of an agent this replica does not own.
var ErrNotOwner = errors.New("not the owner: another replica owns this agent's state")

// owns reports whether this replica may write the agent's durable state:
// it is not standing by, and the scheduler's Owner (the lease manager, in
// the worker) says this replica holds the agent surely. Callers must not
// hold mu.
func (a *Agent) owns() bool {
	_, ok := a.writer()
	return ok
}

// fence returns the fence of the agent's lease the agent's writes are
// made under (the zero fence without a lease manager); ok false when
// this replica must write nothing of the agent: it stands by, or the
// scheduler's Owner does not hold the lease surely. Callers must not
// hold mu.
func (a *Agent) fence() (store.Fence, bool) {
	if a.Standby() || !a.sched.Owns(a.spec.Name) {
		return store.Fence{}, false
	}
	return a.sched.Fence(a.spec.Name)
}

// writer returns the agent's writes under its lease's fence (see fence).
func (a *Agent) writer() (store.Writer, bool) {
	f, ok := a.fence()
	if !ok {
		return nil, false
	}
	return store.Under(a.store, f), true
}

// refusedWrite reports, and logs, a write of the agent's state the store
// refused because the lease it was made under moved (this replica was
// frozen or starved while another took the agent): ErrNotOwner, wrapped.
func (a *Agent) refusedWrite(what string, err error) error {
	a.log.Warn("agent state not written: the agent's lease moved", "what", what)
	return fmt.Errorf("agent %q %s: %w (%w)", a.spec.Name, what, ErrNotOwner, err)
}

// persist writes v (or deletes the key when v is nil). A failure is
// logged with then — what happens next: retried, undone, refused — so the
// log never says a write is lost when it is tried again. Fenced: on a
// replica that does not own the agent nothing is written — the owner's
// stored state stays — and ErrNotOwner is returned.
func (a *Agent) persist(what, then string, v any) error {
	return a.persistAt(a.key(what), what, then, v)
}

// persistAt is persist under key, a key whose layout another package
// shares (inbox.CursorsKey).
func (a *Agent) persistAt(key, what, then string, v any) error {
	w, ok := a.writer()
	if !ok {
		a.log.Warn("agent state not written: this replica does not own the agent", "what", what)
		return fmt.Errorf("agent %q %s: %w", a.spec.Name, what, ErrNotOwner)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	if v == nil {
		err = w.Delete(ctx, key)
	} else {
		data, _ := json.Marshal(v)
		_, err = w.Put(ctx, key, data)
	}
	if errors.Is(err, store.ErrFenced) {
		return a.refusedWrite(what, err)
	}
	if err != nil {
		a.log.Error("could not store agent state", "what", what, "then", then, "error", err)
	}
	return err
}

// pauseRetry is how soon a pause state the store refused is written
// again.
const pauseRetry = time.Second

// syncPause stores the current pause state. Writes are serialised and
// each writes the state as it is when it runs, so the last write is
// always the latest state, however pause and resume interleave. Only the
// owner writes it (persist). A write the store refuses is tried again
// every pauseRetry while this replica owns the agent and the worker runs:
// a pause made during a store outage survives a restart after it.
func (a *Agent) syncPause() {
	a.persistMu.Lock()
	defer a.persistMu.Unlock()
	a.mu.Lock()
	paused, p := a.gate.paused, a.pause
	a.mu.Unlock()
	var rec any
	if paused {
		rec = p
	}
	err := a.persist("paused", "retried in "+pauseRetry.String(), rec)
	if err == nil || errors.Is(err, ErrNotOwner) {
		return
	}
	select {
	case <-a.done:
		a.log.Error("pause state not stored before shutdown; the stored one is in force after a restart", "paused", paused)
	default:
		a.clock.AfterFunc(pauseRetry, a.syncPause)
	}
}

// restore loads the persisted pause, and arms the heartbeat if the
// scheduler restored no timer. It is retried with backoff until it
// succeeds; until then the gate stays closed.
func (a *Agent) restore(ctx context.Context) error {
	var p pausedRecord
	paused, err := a.load(ctx, "paused", &p)
	if err != nil {
		return err
	}
	for _, g := range a.guards {
		if err := g.Restore(ctx, a.spec.Name); err != nil {
			return err
		}
	}
	if err := a.restoreTurns(ctx); err != nil {
		return err
	}
	if a.jr != nil {
		if err := a.jr.restore(ctx); err != nil {
			return err
		}
	}
	if err := a.restoreApprovals(ctx); err != nil {
		return err
	}
	if err := a.restoreMemory(ctx); err != nil {
		return err
	}
	if err := a.restoreModel(ctx); err != nil {
		return err
	}
	if a.leased {
		// Acquired from another replica (or none): its timer and missed
		// ticks were not this scheduler's at Start.
		if err := a.sched.Reload(ctx, a.spec.Name); err != nil {
			return err
		}
	}
	a.mu.Lock()
	if paused && !a.pauseSet {
		a.gate.paused = true
		a.pause = p
	}
	a.gate.restored = true
	a.mu.Unlock()
	if _, _, ok := a.sched.NextTimer(a.spec.Name); !ok && a.spec.Heartbeat > 0 {
		a.sched.SetTimer(a.spec.Name, a.clock.Now().Add(a.spec.Heartbeat), true)
	}
	if paused {
		a.log.Info("state restored", "paused", paused, "paused_since", p.Since, "paused_by", p.By, "pause_reason", p.Reason)
	}
	return nil
}

func (a *Agent) load(ctx context.Context, what string, v any) (bool, error) {
	return a.loadAt(ctx, a.key(what), what, v)
}

// loadAt is load from key (see persistAt).
func (a *Agent) loadAt(ctx context.Context, key, what string, v any) (bool, error) {
	found, err := store.GetJSON(ctx, a.store, key, v)
	if errors.Is(err, store.ErrUnreadable) {
		// A record this version cannot read is reported, not fatal.
		a.log.Error("unreadable persisted state ignored", "what", what, "error", err)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("restore %s: %w", what, err)
	}
	return found, nil
}

// restoreLanes is how many of a driver's agents restore at once. A
// restore is several store reads; a replica that gains 10,000 agents at
// once ran them all together, competing with its own first lease round
// (4.6 s of a 5.4 s start → /readyz) and queueing the store deep enough
// that its 400 ms health probe timed out (every agent told to wait). The
// rest wait their turn, in no particular order. Fewer lanes are slower
// in all: with 16, 10,000 restores took some 10 s more (make bench: the
// idle window still saw them); with 64 and 256, start → /readyz 4.5 and
// 4.2 s, and all restored by then.
const restoreLanes = 64

// restoreWithRetry keeps trying restore until it works or ctx ends.
func (a *Agent) restoreWithRetry(ctx context.Context) bool {
	backoff := time.Second
	for {
		ok, err := a.restoreInLane(ctx)
		if !ok {
			return false
		}
		if err == nil {
			return true
		}
		a.log.Error("state restore failed; retrying, no turn runs until it succeeds", "error", err, "retry_in", backoff)
		retry := make(chan struct{})
		t := a.clock.AfterFunc(backoff, func() { close(retry) })
		select {
		case <-retry:
		case <-ctx.Done():
			t.Stop()
			return false
		case <-a.done:
			t.Stop()
			return false
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

// restoreInLane runs restore in one of the driver's restore lanes (at
// once without a driver: tests build agents alone); ok is false if ctx
// ended or the agent stopped while it waited for one.
func (a *Agent) restoreInLane(ctx context.Context) (ok bool, err error) {
	if a.restoring != nil {
		select {
		case a.restoring <- struct{}{}:
			defer func() { <-a.restoring }()
		case <-ctx.Done():
			return false, nil
		case <-a.done:
			return false, nil
		}
	}
	return true, a.restore(ctx)
}

// remember notes the ids of the messages turn n handled, and forgets those
// of turns that left the history window.
func (a *Agent) remember(n uint64, ids []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range ids {
		a.handled[id] = n
	}
	window := uint64(max(a.spec.HistoryTurns, 1))
	if n <= window {
		return
	}
	for id, at := range a.handled {
		if at <= n-window {
			delete(a.handled, id)
		}
	}
}

// restoreTurns loads the recorded turns in the window — the turn counter
// goes on from the newest, and their messages are known as handled by
// them (Message) — and the agent's cursors: the newest record's, or the
// cursors stored without a turn (inbox.CursorsKey) where those are further. The
// history is read from the store, not from what this process held: a
// replica that owned the agent before may have missed turns another
// recorded since. The inbox then reads on from the cursors.
func (a *Agent) restoreTurns(ctx context.Context) error {
	_ = a.hist.Delete(ctx, &session.DeleteRequest{AppName: AppName, UserID: a.spec.Name, SessionID: a.spec.Name})
	recent, err := a.hist.Recent(ctx, AppName, a.spec.Name, a.spec.Name)
	if err != nil {
		return fmt.Errorf("restore turns: %w", err)
	}
	var cursors inbox.Cursors
	if a.input != nil {
		if _, err := a.loadAt(ctx, inbox.CursorsKey(a.spec.Name), "cursors", &cursors); err != nil {
			return err
		}
	}
	for _, t := range recent {
		cursors = cursors.Merge(t.Cursors)
	}
	a.mu.Lock()
	for _, t := range recent {
		a.turns = max(a.turns, t.N)
		for _, id := range t.Messages {
			a.handled[id] = t.N
		}
	}
	// Read messages the cursors cover are settled already.
	a.inbox.Remove(func(m inbox.Message) bool { return cursors.Covers(m.Pos) })
	a.lg.cursors, a.lg.read = cursors, cursors.Merge(a.lg.read)
	a.lg.dirty = false
	a.lg.since = a.clock.Now()
	a.settledLocked(cursors)
	a.mu.Unlock()
	return nil
}
