package natsinbox

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/natsbus/subject"
)

// A reload changes subscribe: bindings in four steps, so that no message
// is lost or handled twice:
//
//  1. Capture has the input stream hold every subject the new file binds
//     (a stream update that only adds subjects; it is refused, and the
//     reload with it, when the subjects would overlap without one
//     containing the other, or the server refuses them).
//  2. Prepare records, in the binders record (binders.go), this
//     replica's bindings as those of both files, and starts each binding
//     new to every live replica after the stream's last sequence: the
//     agent gets the messages that arrive from then on, not the backlog
//     the other binders left in the log (that backlog is theirs, and
//     partly purged already; a history half there would be worse than
//     none).
//  3. AddAgent, Rebind and RemoveAgent change the roster, each when the
//     agent's loop runs no turn (package worker, driver.Replace): the
//     agent's next turn reads its new inputs from its stored cursors, at
//     or after their since; a removed subject's messages the agent has
//     not handled by then are no longer its. The agents that bind a
//     subject with it are purged below their own cursors from then on.
//  4. Settle records the bindings in force as this replica's.
//
// A subject no agent binds any more stays captured until a restart lays
// the stream's subjects out again: another replica still running the old
// file may bind it, and a stream update that drops a subject would lose
// what its publishers send meanwhile. What it captures is logged at start
// as held for no agent (start.go) and is purged by hand.

// Capture has the input stream hold subjects (with the agents' own
// subjects and those it holds already). It changes nothing when they
// are held already, and fails, changing nothing, when the stream cannot
// hold them.
func (b *Binding) Capture(ctx context.Context, subjects []string) error {
	if b.stream == nil || len(subjects) == 0 {
		return nil
	}
	info, err := b.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("stream %s: %w", b.opts.Stream, err)
	}
	have := info.Config.Subjects
	var missing []string
	for _, s := range subjects {
		if !slices.ContainsFunc(have, func(h string) bool { return h == s || subject.Covers(h, s) }) {
			missing = append(missing, s)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	want, err := subject.Cover(slices.Sorted(slices.Values(append(slices.Clone(have), missing...))))
	if err != nil {
		return fmt.Errorf("stream %s cannot hold subscribe: subjects %v next to %v: %w", b.opts.Stream, missing, have, err)
	}
	cfg := info.Config
	cfg.Subjects = want
	if _, err := b.js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("stream %s: add subjects %v: %w", b.opts.Stream, missing, err)
	}
	b.opts.Log.Info("input stream holds new subscribe: subjects", "stream", b.opts.Stream, "added", missing, "subjects", want, "was", have)
	return nil
}

// Prepare records, before a reload changes the roster, this replica's
// bindings as those of old and next (its file before and after), and
// starts each binding next adds that no live replica has at the stream's
// last sequence. It returns those it started anew. Without a store or in
// core NATS mode it does nothing.
//
// agents are the agents next has: with those this replica runs now, they
// are recorded as this replica's, so that no replica dead-letters the
// input of an agent a file being reloaded adds or removes (unknown.go).
func (b *Binding) Prepare(ctx context.Context, old, next Bindings, agents []string) (Bindings, error) {
	if b.binders == nil || b.stream == nil {
		return Bindings{}, nil
	}
	last, err := b.lastSeq(ctx)
	if err != nil {
		return nil, err
	}
	fresh, err := b.binders.placed(ctx, old, next, union(b.rosterAgents(), agents), last)
	if err != nil {
		return nil, fmt.Errorf("record the subscribe: bindings: %w", err)
	}
	// A message that came between last and the write above may have been
	// purged by a replica that read the record before it: the new
	// bindings start after what the stream holds once the record is
	// written (every purge that covers a later message reads it).
	if len(fresh) > 0 {
		now, err := b.lastSeq(ctx)
		if err != nil {
			return nil, err
		}
		if now > last {
			if err := b.binders.restart(ctx, fresh, last, now); err != nil {
				return nil, fmt.Errorf("record the subscribe: bindings: %w", err)
			}
			last = now
		}
	}
	for subj, agents := range fresh {
		b.opts.Log.Info("subscribe: binding starts after the stream's last sequence: only messages that arrive from now on", "subject", subj, "agents", agents, "after_seq", last)
	}
	return fresh, nil
}

// Settle records the bindings in force after a reload (applied: the
// configured agents') as this replica's: the bindings it dropped no
// longer hold other replicas' purges back.
func (b *Binding) Settle(ctx context.Context, applied Bindings) error {
	if b.binders == nil || b.stream == nil {
		return nil
	}
	if err := b.binders.settled(ctx, applied, b.rosterAgents()); err != nil {
		return fmt.Errorf("record the subscribe: bindings: %w", err)
	}
	return nil
}

// Rebind gives the agent new inputs (a.Subscribe) and a new target when
// its loop runs no turn. Its inbox and deferred subjects and the
// subscribe: subjects it keeps are read on from its stored cursors (a
// subject whose mode changed is read with the new mode); a subject it
// binds anew from its since (Prepare); a subject it no longer binds is no
// longer read for it nor waits for it. t is notified when the agent is
// served here.
func (b *Binding) Rebind(ctx context.Context, a Agent) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.agent(a.Name)
	if old == nil {
		return fmt.Errorf("rebind agent %q: unknown", a.Name)
	}
	al := newAgentLog(a, b.opts.Subjects)
	if b.js == nil {
		_, subscribed := b.subs[a.Name]
		b.mu.Unlock()
		b.unsubscribeCore(a.Name)
		b.roster.Store(b.roster.Load().with(a.Name, al))
		var err error
		if subscribed {
			err = b.subscribeCore(al)
		}
		b.mu.Lock()
		return err
	}
	al.owned.Store(old.owned.Load())
	b.startAt(al)
	b.roster.Store(b.roster.Load().with(a.Name, al))
	old.owned.Store(false) // the router no longer wakes the old target
	for _, in := range old.inputs {
		b.win.clear(in)
	}
	if err := b.arrived(ctx, al); err != nil {
		return err
	}
	b.repurge()
	return nil
}

// startAt gives al's subscribe: inputs their since, as this replica read
// or wrote the binders record last.
func (b *Binding) startAt(al *agentLog) {
	if b.binders == nil {
		return
	}
	for _, in := range al.inputs[2:] {
		in.since.Store(b.binders.since(in.key, al.name))
	}
}

// arrived readies al, just placed in the roster: whatever of it the
// stream holds up to its last sequence — routed before the roster had
// al, or waiting from before — is read from the stream (a hint), and its
// target is told when it is served here. The last sequence is taken
// after the roster changed: every message the router routed with the
// previous roster is at or below it.
func (b *Binding) arrived(ctx context.Context, al *agentLog) error {
	if b.js == nil {
		return nil
	}
	last, err := b.lastSeq(ctx)
	if err != nil {
		// Without it nothing tells which messages the router routed with
		// the previous roster: the inputs are read from the stream, never
		// the window, and purged below the agent's own cursor only.
		b.opts.Log.Warn("agent's input placed without the stream's last sequence; it is read from the stream until the agent is placed again", "agent", al.name, "error", err)
		last = math.MaxUint64 - 1
	}
	for _, in := range al.inputs {
		b.win.lack(in, last)
		raise(&in.hint, last)
		in.dirty.Store(true)
	}
	if al.owned.Load() {
		al.to().Notify()
	}
	return nil
}

// lastSeq returns the input stream's last sequence.
func (b *Binding) lastSeq(ctx context.Context) (uint64, error) {
	info, err := b.stream.Info(ctx, jetstream.WithSubjectFilter(""))
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", b.opts.Stream, err)
	}
	return info.State.LastSeq, nil
}

// repurge has every agent that binds subscribe: subjects purged again:
// a binding that held their floors back may be gone.
func (b *Binding) repurge() {
	if b.purger == nil {
		return
	}
	for _, a := range b.lineup() {
		if len(a.inputs) > 2 {
			b.purger.mark(a)
		}
	}
}

// rosterAgents are the names of the agents in the roster, sorted.
func (b *Binding) rosterAgents() []string {
	return slices.Sorted(maps.Keys(b.lineup()))
}

// union is the sorted names in a or b.
func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// rosterBindings are the subscribe: bindings of the agents in the roster.
func (b *Binding) rosterBindings() Bindings {
	out := Bindings{}
	for name, a := range b.lineup() {
		for _, in := range a.inputs[2:] {
			out.add(in.key, name)
		}
	}
	return out
}
