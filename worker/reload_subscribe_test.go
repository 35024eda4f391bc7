package worker

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/internal/wait"
)

// subscribeSteps are the configs TestReloadSubscribe reloads through, in
// order; held (paused all along) binds alerts.> throughout, so the
// subject's backlog stays in the log and a binding that read it would be
// seen.
var subscribeSteps = []struct {
	what   string
	agents string
	// binds says which agents get which published subjects under it.
	binds map[string][]string
}{
	{"start", `  - {name: a1, model: fake, subscribe: [{subject: "alerts.>"}]}
  - {name: a2, model: fake}
  - {name: held, model: fake, subscribe: [{subject: "alerts.>"}]}
`, map[string][]string{"a1": {"alerts.x", "agents.a1.inbox"}, "a2": {"agents.a2.inbox"}, "held": {"alerts.x"}}},
	{"a subject added to a2", `  - {name: a1, model: fake, subscribe: [{subject: "alerts.>"}]}
  - {name: a2, model: fake, subscribe: [{subject: "alerts.>"}]}
  - {name: held, model: fake, subscribe: [{subject: "alerts.>"}]}
`, map[string][]string{"a1": {"alerts.x", "agents.a1.inbox"}, "a2": {"alerts.x", "agents.a2.inbox"}, "held": {"alerts.x"}}},
	{"an agent added that binds alerts.> and ops.> (a subject new to the stream)", `  - {name: a1, model: fake, subscribe: [{subject: "alerts.>"}]}
  - {name: a2, model: fake, subscribe: [{subject: "alerts.>"}]}
  - {name: held, model: fake, subscribe: [{subject: "alerts.>"}]}
  - {name: a4, model: fake, subscribe: [{subject: "alerts.>"}, {subject: "ops.>"}]}
`, map[string][]string{"a1": {"alerts.x", "agents.a1.inbox"}, "a2": {"alerts.x", "agents.a2.inbox"}, "held": {"alerts.x"}, "a4": {"alerts.x", "ops.y"}}},
	{"a subject removed from a1, a2's made deferred", `  - {name: a1, model: fake}
  - {name: a2, model: fake, subscribe: [{subject: "alerts.>", mode: deferred}]}
  - {name: held, model: fake, subscribe: [{subject: "alerts.>"}]}
  - {name: a4, model: fake, subscribe: [{subject: "alerts.>"}, {subject: "ops.>"}]}
`, map[string][]string{"a1": {"agents.a1.inbox"}, "a2": {"alerts.x", "agents.a2.inbox"}, "held": {"alerts.x"}, "a4": {"alerts.x", "ops.y"}}},
	{"the agent that binds ops.> removed", `  - {name: a1, model: fake}
  - {name: a2, model: fake, subscribe: [{subject: "alerts.>", mode: deferred}]}
  - {name: held, model: fake, subscribe: [{subject: "alerts.>"}]}
`, map[string][]string{"a1": {"agents.a1.inbox"}, "a2": {"alerts.x", "agents.a2.inbox"}, "held": {"alerts.x"}}},
}

// sentMsg is a message the test published, with the configs in force
// when its publish began and when it was acknowledged (lo <= hi; they
// differ when a reload ran meanwhile).
type sentMsg struct {
	subject, id string
	lo, hi      int
}

// TestReloadSubscribe: while messages flow to a subject several agents
// bind (alerts.>), to a subject new to the stream (ops.>) and to the
// agents' own inboxes, reloads add a subject to an agent, add an agent
// that subscribes (the stream takes the new subject), remove a subject
// from an agent and change another's mode, and remove the agent that
// subscribes. Every message an agent binds in every config its publish
// overlapped is handled exactly once by that agent; none it bound in no
// such config is handled by it — in particular a newly bound subject's
// backlog is not (held keeps it in the log); one whose binding changed
// meanwhile at most once. Once every remaining binder has handled all,
// the stream holds nothing of alerts.>: the removed bindings hold no
// purge back.
func TestReloadSubscribe(t *testing.T) {
	dataDir := t.TempDir()
	path := filepath.Join(t.TempDir(), "config.yaml")
	reloadFile(t, path, dataDir, "", subscribeSteps[0].agents)
	w, handled, js := startReloading(t, path)
	wait.Within(t, deadline, "the agents to be owned", func() bool {
		return w.Leases().Held("a1") && w.Leases().Held("a2") && w.Leases().Held("held")
	})
	heldAgent, err := w.Driver().Agent("held")
	if err != nil {
		t.Fatal(err)
	}
	heldAgent.Pause()

	var (
		mu    sync.Mutex
		step  int // the config in force
		next  int // the config in force or being reloaded to
		sent  []sentMsg
		round int
	)
	// publishRound publishes one message on each subject the stream
	// takes now; ops.y only once a config binds it (before, no stream
	// holds it).
	publishRound := func() {
		mu.Lock()
		lo, n := step, round
		round++
		mu.Unlock()
		subjects := []string{"alerts.x", "agents.a1.inbox", "agents.a2.inbox"}
		if lo >= 2 {
			subjects = append(subjects, "ops.y")
		}
		for _, subj := range subjects {
			id := fmt.Sprintf("%s-%d", subj, n)
			msg := nats.NewMsg(subj)
			msg.Data = fmt.Appendf(nil, `{"text": "event %s", "id": %q}`, id, id)
			if _, err := js.PublishMsg(context.Background(), msg); err != nil {
				t.Errorf("publish %s: %v", id, err)
				continue
			}
			mu.Lock()
			sent = append(sent, sentMsg{subject: subj, id: id, lo: lo, hi: next})
			mu.Unlock()
		}
	}
	binds := func(k int, agent, subj string) bool {
		return strings.Contains(","+strings.Join(subscribeSteps[k].binds[agent], ",")+",", ","+subj+",")
	}
	// expect is how often agent must handle m: 1 (bound in every config
	// from lo to hi), 0 (in none), -1 (at most once).
	expect := func(agent string, m sentMsg) int {
		in := 0
		for k := m.lo; k <= m.hi; k++ {
			if binds(k, agent, m.subject) {
				in++
			}
		}
		switch in {
		case m.hi - m.lo + 1:
			return 1
		case 0:
			return 0
		}
		return -1
	}
	agents := []string{"a1", "a2", "held", "a4"}
	// settled waits until every message each agent (but those skipped)
	// must handle has been handled.
	settled := func(what string, skip string) {
		t.Helper()
		mu.Lock()
		msgs := append([]sentMsg(nil), sent...)
		mu.Unlock()
		missing := func() []string {
			var out []string
			for _, m := range msgs {
				for _, a := range agents {
					if a != skip && expect(a, m) == 1 && handled.count(a, m.id) == 0 {
						out = append(out, fmt.Sprintf("%s/%s (configs %d..%d)", a, m.id, m.lo, m.hi))
					}
				}
			}
			return out
		}
		end := time.Now().Add(deadline)
		for left := missing(); len(left) > 0; left = missing() {
			if time.Now().After(end) {
				t.Fatalf("timed out waiting for %s: %d not handled: %v", what, len(left), left[:min(len(left), 20)])
			}
			<-time.After(5 * time.Millisecond)
		}
	}

	for range 10 {
		publishRound()
	}
	for k := 1; k < len(subscribeSteps); k++ {
		settled("the messages before: "+subscribeSteps[k].what, "held")
		// The messages published while the reload runs may meet either
		// config (lo k-1, hi k).
		reloadFile(t, path, dataDir, "", subscribeSteps[k].agents)
		mu.Lock()
		next = k
		mu.Unlock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 20 {
				publishRound()
			}
		}()
		ch, err := w.ReloadConfig(context.Background(), "test")
		if err != nil {
			t.Fatalf("reload %q: %v (%+v)", subscribeSteps[k].what, err, ch)
		}
		mu.Lock()
		step = k
		mu.Unlock()
		<-done
		for range 10 {
			publishRound()
		}
	}
	if _, err := w.Driver().Agent("a4"); err == nil {
		t.Fatal("the removed agent a4 still runs")
	}
	if err := heldAgent.Resume(""); err != nil {
		t.Fatal(err)
	}
	// a2 binds alerts.> deferred now: a last message to its inbox makes
	// a turn that takes what waits.
	mu.Lock()
	round++
	mu.Unlock()
	if _, err := js.Publish(context.Background(), "agents.a2.inbox", []byte(`{"text": "last", "id": "last"}`)); err != nil {
		t.Fatal(err)
	}
	settled("every message handled by its agents", "")

	// Exactly once, or never, per (agent, message).
	mu.Lock()
	msgs := append([]sentMsg(nil), sent...)
	mu.Unlock()
	var bad []string
	for _, m := range msgs {
		for _, a := range agents {
			n, want := handled.count(a, m.id), expect(a, m)
			if (want >= 0 && n != want) || (want < 0 && n > 1) {
				bad = append(bad, fmt.Sprintf("%s handled %s (configs %d..%d) %d times, want %d", a, m.id, m.lo, m.hi, n, want))
			}
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%d wrong of %d:\n%s", len(bad), len(msgs), strings.Join(bad, "\n"))
	}

	// The remaining binders (a2, held) have handled every alert: the
	// stream keeps none, held back by the bindings the reloads removed.
	stream, err := js.Stream(context.Background(), w.Config().NATS.Stream)
	if err != nil {
		t.Fatal(err)
	}
	wait.Within(t, deadline, "alerts.> purged below what its binders handled", func() bool {
		info, err := stream.Info(context.Background(), jetstream.WithSubjectFilter("alerts.>"))
		return err == nil && len(info.State.Subjects) == 0
	})
}
