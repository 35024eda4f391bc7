package driver

import (
	"context"
	"maps"
	"time"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
)

// Log is the agents' durable input (package natsinbox over a JetStream
// stream): a message stays in it until the agent's cursors cover it. The
// driver reads each agent's input from where it stands, records the
// cursors in the same store write as the turn that handled the messages,
// and tells the log when they moved, so it can let go of what is below.
//
// An agent's read position runs ahead of its cursors: messages read into
// the inbox and not yet settled lie between the two. A new owner (or a
// restarted process) reads again from the cursors, so what was read and
// not settled is read again, never lost.
type Log interface {
	// Read returns the agent's messages after from, per input, oldest
	// first: at most room of each kind, wake inputs first. It reads only
	// inputs the log knows to have news after from, so an agent with
	// nothing new costs no request.
	Read(ctx context.Context, agent string, from inbox.Cursors, room inbox.Room) (inbox.LogRead, error)
	// Settled says the agent's cursors are stored as c: the log may purge
	// what they cover. It must not block.
	Settled(agent string, c inbox.Cursors)
	// DeadLetter publishes m, a message read from the log, to the agent's
	// dead-letter subject with reason and detail, and returns once it is
	// stored there. The message stays in the log until a cursor passes it.
	DeadLetter(ctx context.Context, agent string, m inbox.Message, reason, detail string) error
}

// logState is an agent's place in its log, under Agent.mu.
type logState struct {
	// cursors are stored (the newest turn record's, or a settle write's);
	// read is how far the inbox has read, per input (never behind).
	cursors, read inbox.Cursors
	// waiting counts the messages the last read left in the log.
	waiting int
	// dirty: messages were settled without a turn (dead-lettered), and
	// the cursors they let pass are not stored yet.
	dirty bool
	// gen counts changes of ownership: a read that began under another
	// owner's generation is thrown away.
	gen uint64
	// since is when this owner restored the agent: a message the log held
	// before then is one an earlier owner (or process) left, and is
	// counted as read again (redelivered).
	since time.Time
	// storing: storeSettled's write of the cursors is under way.
	storing bool
	// keep, while this replica stands by, are the stored cursors as they
	// were when it let the lease go with nothing of the agent being
	// written (nil otherwise): a take-back that nobody moved goes on
	// from them without a restore (Agent.Acquired).
	keep inbox.Cursors
}

// fill reads what the log holds for the agent beyond what its inbox has
// read, into the inbox, as far as the inbox has room: each wake message
// wakes the agent (Send's path). Only the owner reads, once its state is
// restored. A failed read is logged and tried again later; nothing is
// lost, the messages stay in the log.
func (a *Agent) fill(ctx context.Context) {
	if a.input == nil {
		return
	}
	a.mu.Lock()
	if a.gate.standby || !a.gate.restored || a.gate.stopping {
		a.mu.Unlock()
		return
	}
	gen, from := a.lg.gen, maps.Clone(a.lg.read)
	a.mu.Unlock()
	wr, dr := a.inbox.Room()
	res, err := a.input.Read(ctx, a.spec.Name, from, inbox.Room{Wake: wr, Deferred: dr})
	if err != nil {
		a.log.Warn("cannot read the agent's input from the log; it stays there and is read again", "error", err)
		if a.health != nil {
			a.health.Failed(err)
		}
		a.clock.AfterFunc(time.Second, a.poke)
		return
	}
	if res.RetryIn > 0 {
		a.clock.AfterFunc(res.RetryIn, a.poke)
	}
	var queued []inbox.Message
	a.mu.Lock()
	if gen != a.lg.gen || a.gate.standby {
		a.mu.Unlock()
		return // ownership changed during the read: the next owner reads
	}
	since := a.lg.since
	for _, m := range res.Messages {
		if m.Pos.Seq <= a.lg.read[m.Pos.Input] {
			continue // read already (an overlapping read)
		}
		m = a.stamped(m)
		a.inbox.Push(m)
		queued = append(queued, m)
	}
	if a.lg.read == nil {
		a.lg.read = inbox.Cursors{}
	}
	a.lg.read = a.lg.read.Merge(res.Through)
	a.lg.waiting = res.Waiting
	if res.Rejected > 0 {
		a.lg.dirty = true
	}
	a.mu.Unlock()
	for _, m := range queued {
		a.queued(m, m.Received.Before(since))
	}
}

// nextCursorsLocked returns the cursors as they stand once the messages
// the inbox no longer holds are settled — a completed turn's, or those
// dead-lettered: per input, just below the oldest message of it still
// queued, or as far as the inbox has read when none is. The running
// turn's messages count as settled: call it to record that turn (or when
// none runs). Callers hold mu.
func (a *Agent) nextCursorsLocked() inbox.Cursors {
	next := maps.Clone(a.lg.read)
	if next == nil {
		next = inbox.Cursors{}
	}
	a.inbox.Remove(func(m inbox.Message) bool {
		if m.Pos.InLog() && m.Pos.Seq-1 < next[m.Pos.Input] {
			next[m.Pos.Input] = m.Pos.Seq - 1
		}
		return false
	})
	return a.lg.cursors.Merge(next)
}

// settledLocked makes c the agent's stored cursors and tells the log.
// Callers hold mu.
func (a *Agent) settledLocked(c inbox.Cursors) {
	a.lg.cursors = c
	if a.input != nil {
		a.input.Settled(a.spec.Name, c)
	}
}

// storeSettled stores the cursors that messages dead-lettered without a
// turn let pass, between turns (a turn's record would carry them too).
// Only the owner writes (persist); a failure leaves them for the next
// turn's record or the next try.
func (a *Agent) storeSettled() {
	a.mu.Lock()
	if !a.lg.dirty || a.running || a.gate.standby {
		a.mu.Unlock()
		return
	}
	next, gen := a.nextCursorsLocked(), a.lg.gen
	if !next.Ahead(a.lg.cursors) {
		a.lg.dirty = false // a turn's record carried them already
		a.mu.Unlock()
		return
	}
	a.lg.storing = true
	a.mu.Unlock()
	err := a.persistAt(inbox.CursorsKey(a.spec.Name), "cursors", "retried in 1s", next)
	a.mu.Lock()
	if gen == a.lg.gen {
		a.lg.storing = false
	}
	a.mu.Unlock()
	if err != nil {
		a.clock.AfterFunc(time.Second, a.poke)
		return
	}
	a.mu.Lock()
	if gen == a.lg.gen {
		a.lg.dirty = false
		a.settledLocked(a.lg.cursors.Merge(next))
	}
	a.mu.Unlock()
}

// deadLetter dead-letters m, a message read from the log that leaves the
// inbox without a turn (given up, or dropped by an operator): it is
// published to the agent's dead-letter subject, and the cursors pass it
// at the next store (storeSettled, or the next turn's record). It reports
// whether the dead letter is stored; if not, the message is not let go:
// it is read again after a restart or a change of owner.
func (a *Agent) deadLetter(m inbox.Message, reason, detail string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.input.DeadLetter(ctx, a.spec.Name, m, reason, detail); err != nil {
		a.log.Error("dead-letter publish failed; the message stays in the log and is read again by the next owner", "id", m.ID, "seq", m.Pos.Seq, "reason", reason, "error", err)
		return false
	}
	a.mu.Lock()
	a.lg.dirty = true
	a.mu.Unlock()
	a.poke() // the loop stores the cursors that pass it
	return true
}

// Notify says the agent's log has news (natsinbox.Target): its loop reads
// it, between turns. It never blocks.
func (a *Agent) Notify() { a.poke() }

// queued announces a message the inbox took — again, when an earlier
// owner left it in the log — and wakes the agent for a wake message
// (behind the gate).
func (a *Agent) queued(m inbox.Message, again bool) {
	data := map[string]any{"id": m.ID, "kind": string(m.Kind), "source": m.Source}
	if again {
		data["redelivered"] = true
	}
	a.emit(events.MessageQueued, data)
	if m.Kind != inbox.Wake {
		return
	}
	c := Cause{Source: SourceInbox, At: m.Received}
	switch m.Via {
	case inbox.ViaAlertmanager:
		c.Source = SourceAlertmanager
	case inbox.ViaSubagent:
		c.Source, c.Name = SourceSubagent, m.From
	}
	a.Wake(c)
}
