package worker

import (
	"context"
	"fmt"
	"slices"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
)

// A reload changes agents' subscribe: subjects — an agent added or
// removed with them, a subject added or removed, a mode changed — in the
// order package natsinbox lays out (rebind.go there): before anything
// runs differently, the input stream is made to hold every subject the
// new file binds (a reload the stream cannot take is refused whole,
// nothing changed), and the binders record says this replica binds what
// both files bind, each binding new to every live replica starting after
// the stream's last sequence; then each agent's roster entry changes
// between two of its turns; last, the record says what is in force.
//
// Every replica reloads its own file, in any order: while the files
// disagree, each replica holds the shared subjects back for the bindings
// the others' files have (the binders record), so no replica purges what
// another's agents still need; a binding new to every replica starts at
// the first replica's reload. Subjects no file binds any more stay in the
// stream until a restart.

// subscribeBindings are cfg's subscribe: bindings.
func subscribeBindings(cfg *config.Config) natsinbox.Bindings {
	return natsinbox.AgentBindings(logAgents(cfg, nil))
}

// prepareSubscribe readies the input stream and the binders record for
// next's subscribe: bindings (see above). An error refuses the reload;
// the stream may hold more subjects then, which is harmless.
func (w *Worker) prepareSubscribe(ctx context.Context, cur, next *config.Config) error {
	// Publishers on the embedded server may publish to the new subscribe:
	// subjects and read the new publish: ones too (the old ones stay
	// allowed until a restart, as subjects stay in the stream).
	w.conn.Allow(publisherSubjects(cur, next))
	old, want := subscribeBindings(cur), subscribeBindings(next)
	if same(old, want) && slices.Equal(agentNames(cur), agentNames(next)) {
		return nil
	}
	var subjects []string
	for subj := range want {
		subjects = append(subjects, subj)
	}
	slices.Sort(subjects)
	if err := w.binding.Capture(ctx, subjects); err != nil {
		return fmt.Errorf("subscribe: %w; the running config stays in force", err)
	}
	if _, err := w.binding.Prepare(ctx, old, want, agentNames(next)); err != nil {
		return fmt.Errorf("subscribe: %w; the running config stays in force", err)
	}
	return nil
}

// settleSubscribe records the bindings of the config in force. A failure
// is logged: the record keeps the bindings of both files for this
// replica, which holds purges back for the dropped ones until the next
// reload or start (late, never lost).
func (w *Worker) settleSubscribe(ctx context.Context, cur, applied *config.Config) {
	old, now := subscribeBindings(cur), subscribeBindings(applied)
	if same(old, now) && slices.Equal(agentNames(cur), agentNames(applied)) {
		return
	}
	if err := w.binding.Settle(ctx, now); err != nil {
		w.log.Warn("subscribe: bindings dropped by the reload still hold their subjects' purges back until the next reload or restart", "error", err)
	}
}

// agentNames are cfg's agents' names, sorted: the binders record lists
// them per replica, so that no replica dead-letters the input of an agent
// another replica's file has.
func agentNames(cfg *config.Config) []string {
	out := make([]string, 0, len(cfg.Agents))
	for _, a := range cfg.Agents {
		out = append(out, a.Name)
	}
	slices.Sort(out)
	return out
}

// same reports whether a and b hold the same bindings.
func same(a, b natsinbox.Bindings) bool {
	if len(a) != len(b) {
		return false
	}
	for subj, agents := range a {
		if !slices.Equal(agents, b[subj]) {
			return false
		}
	}
	return true
}

// subscribeChanged reports whether the reload changes agent a's
// subscribe: subjects or their modes.
func subscribeChanged(ch Change, a string) bool {
	return slices.ContainsFunc(ch.Why[a], func(k string) bool { return topKey(k) == "subscribe" })
}

// replicaLive is natsinbox.Options.Live: whether the named replica's
// lease record is live. Before the lease manager runs every replica is
// taken as live (nothing is dropped).
func (w *Worker) replicaLive(ctx context.Context, holder string) (bool, error) {
	if w.leases == nil {
		return true, nil
	}
	return w.leases.Live(ctx, holder)
}
