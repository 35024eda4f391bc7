package watchdog_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/models/scripted"
	"github.com/agent-worker/agent-worker/store/memstore"
	"github.com/agent-worker/agent-worker/watchdog"
)

const deadline = 20 * time.Second

type rig struct {
	t       *testing.T
	a       *driver.Agent
	g       *guard.Guard
	wd      *watchdog.Watchdog
	m       *scripted.Model
	c       *clock.Fake
	sub     *events.Subscription
	mu      sync.Mutex
	prompts []string
	tools   int // tool calls actually run
}

func report(summary string) config.ScriptStep {
	return config.ScriptStep{Call: &config.Call{Name: "report_done", Args: map[string]any{"summary": summary}}}
}

func newRig(t *testing.T, mode string, script []config.ScriptStep, limits guard.Limits) *rig {
	t.Helper()
	return newRigSpec(t, mode, script, limits, driver.Spec{Tools: []string{"report_done"}})
}

// newRigSpec is newRig with the agent's spec (its name, model and history
// are the rig's).
func newRigSpec(t *testing.T, mode string, script []config.ScriptStep, limits guard.Limits, spec driver.Spec) *rig {
	t.Helper()
	r := &rig{t: t}
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	r.c = c
	st := memstore.New(c)
	bus := events.NewBus(0, nil)
	r.sub = bus.Subscribe(10000, nil)
	var err error
	r.m, err = scripted.New("fake", config.Model{Script: script, Loop: true}, scripted.WithHook(func(_ context.Context, req *model.LLMRequest, _ int) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i := len(req.Contents) - 1; i >= 0; i-- {
			if c := req.Contents[i]; c.Role == genai.RoleUser && len(c.Parts) > 0 && c.Parts[0].Text != "" {
				r.prompts = append(r.prompts, c.Parts[0].Text)
				break
			}
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	r.g = guard.New(guard.Options{Store: st, Clock: c, Events: bus})
	r.g.AddAgent("a", "fake", limits)
	r.wd = watchdog.New(watchdog.Options{Events: bus, Clock: c, Tripper: r.g})
	r.wd.AddAgent("a", mode, watchdog.Config{})
	spec.Name, spec.Model, spec.HistoryTurns = "a", r.m, 3
	d, err := driver.New(driver.Deps{Clock: c, Store: st, Events: bus, Guards: []hook.Guard{r.g, r.wd}},
		[]driver.Spec{spec})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	r.a, _ = d.Agent("a")
	return r
}

// nextPrompt runs do and returns the first prompt the model gets after
// it (a turn-started event comes before its model call).
func (r *rig) nextPrompt(do func()) string {
	r.mu.Lock()
	n := len(r.prompts)
	r.mu.Unlock()
	do()
	end := time.Now().Add(deadline)
	for {
		r.mu.Lock()
		if len(r.prompts) > n {
			p := r.prompts[n]
			r.mu.Unlock()
			return p
		}
		r.mu.Unlock()
		if time.Now().After(end) {
			r.t.Fatal("no model call")
		}
		<-time.After(time.Millisecond)
	}
}

func (r *rig) send(text string) {
	r.a.Send(inbox.Message{Kind: inbox.Wake, Text: text, Source: "test"})
}

// waitEvent returns the next event of typ, counting report-done events
// (tool calls that actually ran) on the way.
func (r *rig) waitEvent(typ string) events.Event {
	r.t.Helper()
	return wait.Event(r.t, deadline, r.sub, "a "+typ+" event", func(e events.Event) bool {
		if e.Type == events.ReportDone {
			r.tools++
		}
		return e.Type == typ
	})
}

func TestRepeatedCallIsHaltedMidTurnInEnforceMode(t *testing.T) {
	t.Parallel()
	r := newRig(t, watchdog.ModeEnforce, []config.ScriptStep{report("same")}, guard.Limits{})
	r.send("go")
	al := r.waitEvent(watchdog.EventAlert)
	if al.Data["signal"] != watchdog.SignalRepeat || al.Data["calls"] != 5 || al.Data["action"] != "halted" {
		t.Fatalf("alert %v", al.Data)
	}
	tr := r.waitEvent(guard.EventTripped)
	if tr.Data["guardrail"] != watchdog.Guardrail {
		t.Fatalf("trip %v", tr.Data)
	}
	f := r.waitEvent(events.TurnFailed)
	if f.Data["outcome"] != driver.OutcomeHalted {
		t.Fatalf("turn %v", f.Data)
	}
	if n := r.m.Calls(); n != 5 {
		t.Fatalf("%d model calls: the loop must stop at the 5th repeat", n)
	}
	if r.tools != 4 {
		t.Fatalf("%d tool calls ran; the 5th repeat must not run", r.tools)
	}
	if r.a.State() != driver.Halted {
		t.Fatalf("state %s", r.a.State())
	}
	// Reset lets it run again, and the model is told what it repeated.
	last := r.nextPrompt(func() {
		if _, err := r.g.Reset("a", watchdog.Guardrail, 0); err != nil {
			t.Fatal(err)
		}
	})
	if !strings.Contains(last, "You have made the same tool call 5 times in a row") {
		t.Fatalf("prompt after reset lacks the feedback:\n%s", last)
	}
	var note string
	for _, line := range strings.Split(last, "\n") {
		if strings.Contains(line, "same tool call") {
			note = line
		}
	}
	for _, word := range []string{"operator", "reset", "halt", "guardrail"} {
		if strings.Contains(strings.ToLower(note), word) {
			t.Fatalf("the model was told about %q: %s", word, note)
		}
	}
}

func TestFeedbackModeTellsTheNextPromptAndDoesNotHalt(t *testing.T) {
	t.Parallel()
	r := newRig(t, watchdog.ModeFeedback, []config.ScriptStep{report("same")}, guard.Limits{ModelCallsPerTurn: 8})
	r.send("go")
	if al := r.waitEvent(watchdog.EventAlert); al.Data["action"] != "told the model" {
		t.Fatalf("alert %v", al.Data)
	}
	if f := r.waitEvent(events.TurnFailed); f.Data["outcome"] != driver.OutcomeCapped {
		t.Fatalf("turn %v", f.Data)
	}
	if r.a.State() == driver.Halted {
		t.Fatal("feedback mode halted the agent")
	}
	last := r.nextPrompt(func() { r.send("next") }) // a capped turn is cut, not retried: the next message runs
	if !strings.Contains(last, "You have made the same tool call 5 times in a row: report_done") {
		t.Fatalf("next prompt lacks the note:\n%s", last)
	}
}

func TestCycleAndDominantPatternsAreCaught(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		script []string
		signal string
		calls  int
	}{
		{"A-B cycle", []string{"A", "B"}, watchdog.SignalCycle, 6},
		{"dominant", []string{"A", "A", "b", "A", "A", "c", "A", "A", "d", "A", "A", "e"}, watchdog.SignalDominant, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var script []config.ScriptStep
			for _, s := range tc.script {
				script = append(script, report(s))
			}
			r := newRig(t, watchdog.ModeEnforce, script, guard.Limits{})
			r.send("go")
			al := r.waitEvent(watchdog.EventAlert)
			if al.Data["signal"] != tc.signal {
				t.Fatalf("first alert %v, want %s", al.Data, tc.signal)
			}
			r.waitEvent(events.TurnFailed)
			if n := r.m.Calls(); n != tc.calls {
				t.Fatalf("%d model calls, want the loop stopped at call %d", n, tc.calls)
			}
		})
	}
}

func TestWarnModeOnlyLogs(t *testing.T) {
	t.Parallel()
	r := newRig(t, watchdog.ModeWarn, []config.ScriptStep{report("same")}, guard.Limits{ModelCallsPerTurn: 7})
	r.send("go")
	if al := r.waitEvent(watchdog.EventAlert); al.Data["action"] != "logged" {
		t.Fatalf("alert %v", al.Data)
	}
	r.waitEvent(events.TurnFailed)
	last := r.nextPrompt(func() { r.send("next") }) // a capped turn is cut, not retried: the next message runs
	if strings.Contains(last, "same tool call") {
		t.Fatal("warn mode told the model")
	}
}

func wakeIn(seconds int) config.ScriptStep {
	return config.ScriptStep{Call: &config.Call{Name: "schedule_next_turn", Args: map[string]any{"wake_in_seconds": seconds}}}
}

func sleepSpec() driver.Spec {
	s := driver.Spec{Tools: []string{"schedule_next_turn"}}
	s.Sleep.Min, s.Sleep.Max = 10*time.Second, time.Minute
	return s
}

func TestLoopAcrossTurnsIsHalted(t *testing.T) {
	t.Parallel()
	// Each turn asks to run again at once: clamped to sleep.min, it wakes
	// itself every 10s with the same calls.
	r := newRigSpec(t, watchdog.ModeEnforce, []config.ScriptStep{wakeIn(0), {Text: "again"}}, guard.Limits{}, sleepSpec())
	r.a.Wake(driver.Cause{Source: driver.SourceStartup})
	r.waitEvent(events.TurnCompleted) // woken by the start, not eager
	for turn := 2; ; turn++ {
		r.c.Advance(10 * time.Second)
		r.waitEvent(events.TurnCompleted)
		if r.a.State() == driver.Halted {
			if turn != 6 {
				t.Fatalf("halted after turn %d, want after 5 eager turns (turn 6)", turn)
			}
			break
		}
		if turn > 6 {
			t.Fatal("a loop across turns was never stopped")
		}
	}
	if s := r.a.Status(); !strings.Contains(s.HaltReason, "the same tool calls in 5 turns in a row") {
		t.Fatalf("halt reason: %q", s.HaltReason)
	}
}

func TestPeriodicAgentIsNoLoop(t *testing.T) {
	t.Parallel()
	// The demo's pattern: it asks for five minutes, is clamped to the
	// one-minute max, and does the same thing every time. It sleeps as
	// long as it may: no loop.
	r := newRigSpec(t, watchdog.ModeEnforce, []config.ScriptStep{wakeIn(300), {Text: "sleeping"}}, guard.Limits{}, sleepSpec())
	r.a.Wake(driver.Cause{Source: driver.SourceStartup})
	r.waitEvent(events.TurnCompleted)
	for range 12 {
		r.c.Advance(time.Minute)
		r.waitEvent(events.TurnCompleted)
	}
	if st := r.a.State(); st == driver.Halted {
		t.Fatalf("a periodic agent was halted: %s", r.a.Status().HaltReason)
	}
}
