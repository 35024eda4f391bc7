package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/adk/model"
	"google.golang.org/adk/plugin"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/history"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/memory"
	"github.com/agent-worker/agent-worker/store"
)

// MemorySpec configures an agent's running memory (Spec.Memory): the
// turns that leave its history window are folded into a summary by a
// model, between turns, and the summary is placed in every prompt (see
// package memory).
//
// Folds come in batches: a fold is due when a turn leaves the history
// window (Spec.HistoryTurns), and it takes in, in one model call, every
// turn not yet folded but the newest tenth of the window (at least one;
// see memory_batch.go). The window falls well under its budget and the
// next fold is due HistoryTurns+1-keep turns later: one fold call per
// ten turns at the default window of 10, not one per turn, while the
// model never sees more than HistoryTurns turns. The agent's loop folds
// after each turn and whenever it wakes with no turn to run: at most one
// model call each time, so a wake waits for at most one fold. A fold is admitted by the agent's guards like a turn (a
// halted agent does not fold, nor does a paused one unless an operator
// forces it, nor any while a dependency is down) and its cost is charged
// to the agent's ledger through every guard that takes charges
// (guard.Guard.Charge): ceilings bind it like any model call. A failed
// fold folds nothing: its turns stay in the store (history keeps them
// until folded) and it is retried after Spec.Retry's backoff. Only the
// agent's owner folds and writes the memory (key agent.<name>.memory).
type MemorySpec struct {
	// Enabled turns folding on. False: the window alone, as before; a
	// memory stored earlier is shown by Memory but not placed in prompts.
	Enabled bool
	// Model writes the memory; nil: Spec.Model.
	Model model.LLM
	// MaxTokens bounds the memory; memory.DefaultMaxTokens when zero.
	MaxTokens int
	// Cost prices one of Model's responses in USD; nil: $0 (an unpriced
	// model: no ceiling binds its folds).
	Cost func(*model.LLMResponse) float64

	// keep is how many of the newest turns a due fold leaves unfolded;
	// 0: keepAfterFold(HistoryTurns). The benchmarks set it to the
	// window to measure the old policy, one fold per turn that leaves it.
	keep int
}

// ErrMemoryOff is returned by CompactMemory for an agent whose memory is
// not enabled.
var ErrMemoryOff = errors.New("the agent's memory is off (memory.enabled: false)")

// Reasons a due fold is skipped (memory-compaction-skipped's reason).
const (
	SkipHalted      = "halted"
	SkipPaused      = "paused"
	SkipGuardrail   = "guardrail"
	SkipUnavailable = "unavailable"
	// SkipCleared: the memory was cleared while the fold ran; its result
	// was discarded and its turns are folded again into the empty memory.
	SkipCleared = "cleared"
)

// foldTimeout bounds one fold when the agent has no turn timeout.
const foldTimeout = 10 * time.Minute

// memState is an agent's memory as its loop keeps it.
type memState struct {
	// write orders the memory's stored writes (a fold's result, a
	// failure, a clear); it is never held across a model call.
	write sync.Mutex

	mu      sync.Mutex
	rec     memory.Record
	gen     uint64    // raised by a clear: a fold begun before it is discarded
	retryAt time.Time // a failed fold waits until then
	forced  bool      // an operator asked for a fold of every turn
	folding bool      // a fold's model call is running
	skipped string    // why due folds wait, said once per reason
	dropped int       // turns deleted unfolded (the store's bound)
}

// MemoryView is an agent's memory as operators see it (GET
// /v1/agents/{name}/memory): the stored record and the fold's state on
// the agent's owner.
type MemoryView struct {
	Agent   string `json:"agent"`
	Enabled bool   `json:"enabled"`
	memory.Record
	// MaxTokens is the memory's bound (memory.max_tokens); FoldModel the
	// model that folds (memory.model, else the agent's).
	MaxTokens int    `json:"max_tokens"`
	FoldModel string `json:"fold_model,omitempty"`
	// Unfolded counts the turns that left the window and wait to be
	// folded (all turns not yet folded while a forced fold is queued).
	Unfolded int `json:"unfolded_turns"`
	// Folding: a fold's model call runs now. Queued: an operator's fold
	// waits for the current turn to end.
	Folding bool `json:"folding"`
	Queued  bool `json:"compaction_queued,omitempty"`
	// NextAttempt is when a failed fold is tried again.
	NextAttempt *time.Time `json:"next_attempt,omitempty"`
	// Skipped says why due folds wait (halted, paused, guardrail,
	// unavailable).
	Skipped string `json:"skipped,omitempty"`
	// DroppedTurns counts turns deleted unfolded since this replica took
	// the agent: folds failed for longer than the store holds turns.
	DroppedTurns int `json:"dropped_turns,omitempty"`
}

// newHistory builds the agent's history: with memory on it keeps turns
// that leave the window until they are folded, and reports those the
// store's bound deletes unfolded to the agent bind is given.
func newHistory(st store.Store, s Spec) (h *history.Service, bind func(*Agent)) {
	if !s.Memory.Enabled {
		return history.New(st, s.HistoryTurns), func(*Agent) {}
	}
	var owner struct {
		sync.Mutex
		a *Agent
	}
	h = history.New(st, s.HistoryTurns, history.KeepUntilFolded(func(_, _, _ string, turns []uint64) {
		owner.Lock()
		a := owner.a
		owner.Unlock()
		if a != nil {
			a.turnsDropped(turns)
		}
	}))
	return h, func(a *Agent) {
		owner.Lock()
		owner.a = a
		owner.Unlock()
	}
}

// memoryPlugin places the memory in every model request of the agent's
// turns (memory.Plugin); nil with memory off.
func (a *Agent) memoryPlugin() *plugin.Plugin {
	if !a.spec.Memory.Enabled {
		return nil
	}
	return memory.Plugin(func() string {
		a.mem.mu.Lock()
		defer a.mem.mu.Unlock()
		return a.mem.rec.Text
	})
}

// foldModel is the model that writes the memory.
func (a *Agent) foldModel() model.LLM {
	if m := a.spec.Memory.Model; m != nil {
		return m
	}
	return a.spec.Model
}

// MemoryTokens returns the estimated size of the memory this replica
// holds for the agent (0 with memory off).
func (a *Agent) MemoryTokens() int {
	if !a.spec.Memory.Enabled {
		return 0
	}
	a.mem.mu.Lock()
	defer a.mem.mu.Unlock()
	return a.mem.rec.Tokens
}

// Memory returns the agent's memory as this replica holds it, with the
// number of turns waiting to be folded (read from the history, which may
// load it from the store). Ask the owner: a standby's copy is what it
// last loaded.
func (a *Agent) Memory(ctx context.Context) (MemoryView, error) {
	m := &a.mem
	m.mu.Lock()
	v := MemoryView{Agent: a.spec.Name, Enabled: a.spec.Memory.Enabled, Record: m.rec, MaxTokens: a.memoryMaxTokens(),
		Folding: m.folding, Queued: m.forced, Skipped: m.skipped, DroppedTurns: m.dropped}
	if !m.retryAt.IsZero() && m.retryAt.After(a.clock.Now()) {
		at := m.retryAt
		v.NextAttempt = &at
	}
	forced := m.forced
	m.mu.Unlock()
	if !v.Enabled {
		return v, nil
	}
	v.FoldModel = a.foldModel().Name()
	held, err := a.hist.Unfolded(ctx, AppName, a.spec.Name, a.spec.Name, forced)
	if err != nil {
		return v, fmt.Errorf("count unfolded turns: %w", err)
	}
	v.Unfolded = len(held)
	return v, nil
}

// foldKeep is how many of the newest turns a due fold leaves unfolded.
func (a *Agent) foldKeep() int {
	if k := a.spec.Memory.keep; k > 0 {
		return k
	}
	return keepAfterFold(a.spec.HistoryTurns)
}

func (a *Agent) memoryMaxTokens() int {
	if n := a.spec.Memory.MaxTokens; n > 0 {
		return n
	}
	return memory.DefaultMaxTokens
}

// CompactMemory asks for a fold of every turn not yet folded — the
// window's too, so the next turn sees the memory and no older turn — as
// soon as no turn runs: now when the agent sleeps (or is paused: an
// operator's fold runs behind a pause), else right after the running
// turn. It does not wait for the fold: Memory shows its outcome, and so
// do the memory-compacted and memory-compaction-failed events. It returns
// ErrMemoryOff, hook.ErrHalted (a halted agent does not fold: its ledger is
// closed) or ErrStopped instead of queueing.
func (a *Agent) CompactMemory(ctx context.Context, by hook.Audit) (MemoryView, error) {
	if !a.spec.Memory.Enabled {
		return MemoryView{}, ErrMemoryOff
	}
	a.mu.Lock()
	halt, stopping := a.gate.halt, a.gate.stopping
	a.mu.Unlock()
	switch {
	case stopping:
		return MemoryView{}, ErrStopped
	case halt != "":
		return MemoryView{}, fmt.Errorf("%w (%s): a halted agent does not fold its memory", hook.ErrHalted, halt)
	}
	a.mem.mu.Lock()
	a.mem.forced = true
	a.mem.retryAt = time.Time{}
	a.mem.mu.Unlock()
	a.log.Info("memory fold requested", "by", by.By, "reason", by.Reason)
	a.poke()
	return a.Memory(ctx)
}

// ClearMemory empties the agent's memory and stores it empty, on behalf
// of by: the memory-cleared event and the log name who and why. A fold
// running meanwhile is discarded when it ends (its turns are folded again,
// into the empty memory); turns already folded are not brought back. It
// fails, changing nothing, when the store refuses the write (ErrNotOwner
// on a replica that does not own the agent).
func (a *Agent) ClearMemory(ctx context.Context, by hook.Audit) (MemoryView, error) {
	m := &a.mem
	m.write.Lock()
	m.mu.Lock()
	old := m.rec
	rec := memory.Record{Through: old.Through, Compactions: old.Compactions, Cleared: a.clock.Now(), ClearedBy: by.By}
	m.mu.Unlock()
	if err := a.persist("memory", "the clear is refused; the memory is unchanged", rec); err != nil {
		m.write.Unlock()
		return MemoryView{}, fmt.Errorf("clear memory: %w", err)
	}
	m.mu.Lock()
	m.rec, m.gen = rec, m.gen+1
	m.mu.Unlock()
	m.write.Unlock()
	a.log.Info("memory cleared", "by", by.By, "reason", by.Reason, "turns_folded", old.TurnsFolded, "tokens", old.Tokens)
	a.emit(events.MemoryCleared, audited(by, map[string]any{"turns_folded": old.TurnsFolded, "tokens": old.Tokens}))
	return a.Memory(ctx)
}

// restoreMemory loads the stored memory (part of restore). With memory
// on, the history learns which turns it holds, and turn numbers go on
// from the newest folded, should the history have lost its records.
func (a *Agent) restoreMemory(ctx context.Context) error {
	var rec memory.Record
	if _, err := a.load(ctx, "memory", &rec); err != nil {
		return err
	}
	m := &a.mem
	m.mu.Lock()
	m.rec, m.gen = rec, m.gen+1 // a fold begun before a loss of the lease is stale
	m.mu.Unlock()
	if !a.spec.Memory.Enabled {
		return nil
	}
	a.hist.Folded(AppName, a.spec.Name, a.spec.Name, rec.Through)
	a.mu.Lock()
	a.turns = max(a.turns, rec.Through)
	a.mu.Unlock()
	return nil
}

// foldMemory folds a batch (foldBatch: every turn not yet folded but the
// newest few) into the memory when a turn has left the window — or,
// forced, every turn not yet folded: one model call at most. It runs on the agent's loop, between turns, and says what it did
// in the log, an event and (through the event) the metrics.
func (a *Agent) foldMemory(ctx context.Context) {
	if !a.spec.Memory.Enabled {
		return
	}
	a.mu.Lock()
	if a.gate.stopping || a.gate.standby || a.gate.releasing || !a.gate.restored || a.running {
		a.mu.Unlock()
		return // not this replica's to fold now, or a turn runs
	}
	gate := ""
	switch {
	case a.gate.halt != "":
		gate = SkipHalted
	case a.gate.paused:
		gate = SkipPaused
	}
	a.mu.Unlock()
	m := &a.mem
	m.mu.Lock()
	forced, retryAt, gen, prev := m.forced, m.retryAt, m.gen, m.rec.Text
	m.mu.Unlock()
	if !forced && a.clock.Now().Before(retryAt) {
		return // the retry's timer pokes the loop
	}
	held, err := a.hist.Unfolded(ctx, AppName, a.spec.Name, a.spec.Name, forced)
	if err != nil {
		a.foldFailed(gen, fmt.Errorf("read the turns to fold: %w", err), 0)
		return
	}
	if len(held) == 0 {
		if forced {
			m.mu.Lock()
			m.forced = false
			m.mu.Unlock()
			a.log.Info("memory fold requested, but every turn is folded already")
		}
		return
	}
	if a.foldHeldBack(ctx, gate, forced, len(held)) {
		return
	}

	if !forced {
		// A turn left the window: fold it with all but the newest few.
		all, err := a.hist.Unfolded(ctx, AppName, a.spec.Name, a.spec.Name, true)
		if err != nil {
			a.foldFailed(gen, fmt.Errorf("read the turns to fold: %w", err), len(held))
			return
		}
		held = foldBatch(all, a.foldKeep())
	}
	a.fold(ctx, gen, prev, held, forced)
}

// foldHeldBack reports whether a fold of held turns waits, and says why
// (foldSkipped): behind the agent's gate (halted, or paused unless the
// fold is forced), an outage or a guardrail.
func (a *Agent) foldHeldBack(ctx context.Context, gate string, forced bool, held int) bool {
	if gate == SkipPaused && forced {
		gate = "" // an operator's fold runs behind a pause
	}
	if gate != "" {
		a.foldSkipped(gate, "", held)
		return true
	}
	if a.health != nil {
		if err := a.health.Unavailable(); err != nil {
			a.foldSkipped(SkipUnavailable, err.Error(), held)
			return true
		}
	}
	for _, g := range a.guards {
		if err := g.Admit(ctx, a.spec.Name); err != nil {
			a.foldSkipped(SkipGuardrail, err.Error(), held)
			return true
		}
	}
	return false
}

// fold folds held into the memory prev with one model call, within the
// turn timeout and cut short by a shutdown; charges its cost to the
// guards; and stores what it wrote (foldDone) or says it failed.
func (a *Agent) fold(ctx context.Context, gen uint64, prev string, held []history.Held, forced bool) {
	m := &a.mem
	turns := make([]memory.Turn, len(held))
	for i, h := range held {
		turns[i] = memory.Turn{N: h.N, At: h.At, Events: h.Events}
	}
	fm := a.foldModel()
	sum := memory.Summariser{Agent: a.spec.Name, Model: fm, MaxTokens: a.memoryMaxTokens()}
	limit := a.spec.TurnTimeout
	if limit <= 0 {
		limit = foldTimeout
	}
	fctx, cancel := context.WithTimeout(ctx, limit)
	go func() {
		select {
		case <-a.done: // shutting down: a fold is never worth waiting for
			cancel()
		case <-fctx.Done():
		}
	}()
	m.mu.Lock()
	m.folding, m.skipped = true, ""
	m.mu.Unlock()
	start := a.clock.Now()
	f, err := sum.Fold(fctx, prev, turns)
	cancel()
	m.mu.Lock()
	m.folding = false
	m.mu.Unlock()
	cost := 0.0
	if f.Response != nil && a.spec.Memory.Cost != nil {
		cost = a.spec.Memory.Cost(f.Response)
	}
	if cost > 0 {
		for _, g := range a.guards {
			if c, ok := g.(hook.Charger); ok {
				c.Charge(a.spec.Name, cost)
			}
		}
	}
	if err != nil {
		a.foldFailed(gen, err, len(held))
		return
	}
	a.foldDone(gen, f, fm.Name(), len(held), forced, cost, a.clock.Now().Sub(start))
}

// foldDone stores the memory a fold wrote, then lets the history forget
// the turns it took in: a memory that could not be stored folds nothing.
func (a *Agent) foldDone(gen uint64, f memory.Fold, modelName string, held int, forced bool, cost float64, took time.Duration) {
	m := &a.mem
	m.write.Lock()
	m.mu.Lock()
	if m.gen != gen {
		m.mu.Unlock()
		m.write.Unlock()
		a.foldSkipped(SkipCleared, "the memory was cleared (or reloaded) while the fold ran", held)
		a.poke() // fold those turns again, into the memory as it is now
		return
	}
	rec := m.rec
	rec.Text, rec.Tokens, rec.Clipped = f.Text, memory.Tokens(f.Text), f.Clipped
	rec.TurnsFolded += f.Turns
	rec.Through = max(rec.Through, f.Through)
	rec.Updated, rec.Model = a.clock.Now(), modelName
	rec.Compactions++
	rec.LastError, rec.LastErrorAt, rec.Failures = "", time.Time{}, 0
	m.mu.Unlock()
	if err := a.persist("memory", "the fold is retried; its turns stay in the history", rec); err != nil {
		m.write.Unlock()
		a.foldFailed(gen, fmt.Errorf("store the memory: %w", err), held)
		return
	}
	more := held > f.Turns
	m.mu.Lock()
	m.rec, m.retryAt = rec, time.Time{}
	m.forced = forced && more
	m.mu.Unlock()
	a.hist.Folded(AppName, a.spec.Name, a.spec.Name, rec.Through)
	m.write.Unlock()
	if f.Clipped {
		a.log.Warn("memory clipped: the model wrote more than memory.max_tokens", "max_tokens", a.memoryMaxTokens())
	}
	a.log.Info("memory folded", "turns", f.Turns, "through", rec.Through, "tokens", rec.Tokens, "turns_folded", rec.TurnsFolded,
		"cost_usd", cost, "duration", took, "forced", forced, "model", modelName, "waiting", held-f.Turns)
	a.emit(events.MemoryCompacted, map[string]any{"turns": f.Turns, "through": rec.Through, "tokens": rec.Tokens,
		"turns_folded": rec.TurnsFolded, "cost_usd": cost, "duration_ms": took.Milliseconds(), "clipped": f.Clipped,
		"forced": forced, "model": modelName})
	if more {
		a.poke() // the rest, one call at a time, turns first
	}
}

// foldFailed records a failed fold — its turns stay — and arms the retry
// after Spec.Retry's backoff.
func (a *Agent) foldFailed(gen uint64, err error, held int) {
	m := &a.mem
	now := a.clock.Now()
	m.write.Lock()
	m.mu.Lock()
	m.rec.Failures++
	m.rec.LastError, m.rec.LastErrorAt = err.Error(), now
	failures := m.rec.Failures
	delay := a.spec.Retry.Delay(failures)
	m.retryAt, m.forced = now.Add(delay), false
	rec, current := m.rec, m.gen == gen
	m.mu.Unlock()
	if current {
		_ = a.persist("memory", "the fold error is shown by this replica only, until the memory is stored again", rec) // so the owner's next view, here or elsewhere, says why
	}
	m.write.Unlock()
	a.log.Warn("memory fold failed; its turns stay and it is retried", "error", err, "turns", held, "failures", failures, "retry_in", delay)
	a.emit(events.MemoryCompactionFailed, map[string]any{"error": err.Error(), "turns": held, "failures": failures, "retry_in_ms": delay.Milliseconds()})
	a.clock.AfterFunc(delay, a.poke)
}

// foldSkipped says, once per reason until a fold runs, why a due fold
// waits.
func (a *Agent) foldSkipped(reason, detail string, held int) {
	m := &a.mem
	m.mu.Lock()
	same := m.skipped == reason
	m.skipped = reason
	m.mu.Unlock()
	if same {
		return
	}
	a.log.Info("memory fold skipped", "reason", reason, "detail", detail, "turns", held)
	data := map[string]any{"reason": reason, "turns": held}
	if detail != "" {
		data["error"] = detail
	}
	a.emit(events.MemoryCompactionSkipped, data)
}

// turnsDropped says that the history deleted turns unfolded: folds have
// failed for longer than the store holds turns.
func (a *Agent) turnsDropped(turns []uint64) {
	a.mem.mu.Lock()
	a.mem.dropped += len(turns)
	a.mem.mu.Unlock()
	a.log.Error("turns deleted before they were folded into the memory: the store holds no more while folds fail", "turns", turns, "count", len(turns))
	a.emit(events.MemoryTurnsDropped, map[string]any{"turns": turns, "count": len(turns)})
}
