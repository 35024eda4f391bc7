package background_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/adk/model"
	"google.golang.org/adk/tool"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/background"
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
	"github.com/agent-worker/agent-worker/tools"
)

const deadline = 20 * time.Second

type rig struct {
	t       *testing.T
	d       *driver.Driver
	a       *driver.Agent
	g       *guard.Guard
	m       *background.Manager
	sub     *events.Subscription
	mu      sync.Mutex
	prompts []string
}

// newRig runs a parent "boss" whose script is parent, with subagents that
// play sub (one fresh scripted instance each); every scripted step
// reporting 100k input tokens costs $1.
func newRig(t *testing.T, parent, sub []config.ScriptStep, spec background.Spec) *rig {
	t.Helper()
	r := &rig{t: t}
	c := clock.Real()
	st := memstore.New(c)
	bus := events.NewBus(0, nil)
	r.sub = bus.Subscribe(10000, nil)
	prices := guard.NewPrices(map[string]config.Price{"dollar": {InputPerMTok: 10}})
	r.g = guard.New(guard.Options{Store: st, Clock: c, Events: bus, Prices: prices})
	r.g.AddAgent("boss", "dollar", guard.Limits{})
	r.m = background.New(background.Options{Clock: c, Events: bus, Charger: r.g})
	pm, err := scripted.New("dollar", config.Model{Model: "dollar", Script: parent, Loop: true}, scripted.WithHook(r.hook))
	if err != nil {
		t.Fatal(err)
	}
	r.d, err = driver.New(driver.Deps{Clock: c, Store: st, Events: bus, Guards: []hook.Guard{r.g}, Subagents: r.m},
		[]driver.Spec{{Name: "boss", Model: pm, Tools: []string{"spawn_subagent", "stop_subagent"}, HistoryTurns: 5}})
	if err != nil {
		t.Fatal(err)
	}
	r.a, _ = r.d.Agent("boss")
	price, _ := prices.Lookup("dollar")
	spec.Price, spec.Priced = price, true
	spec.Model = func() (model.LLM, error) {
		return scripted.New("dollar", config.Model{Model: "dollar", Script: sub, Loop: true})
	}
	r.m.Add("boss", r.a, spec)
	if err := r.d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r.m.Shutdown(ctx)
		r.d.Shutdown(context.Background())
	})
	return r
}

func (r *rig) hook(_ context.Context, req *model.LLMRequest, _ int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(req.Contents) - 1; i >= 0; i-- {
		if c := req.Contents[i]; c.Role == genai.RoleUser && len(c.Parts) > 0 && c.Parts[0].Text != "" {
			r.prompts = append(r.prompts, c.Parts[0].Text)
			return nil
		}
	}
	return nil
}

func (r *rig) waitEvent(typ string) events.Event {
	r.t.Helper()
	return wait.Event(r.t, deadline, r.sub, "a "+typ+" event", wait.OfType(typ))
}

func spawn(task string) config.ScriptStep {
	return config.ScriptStep{Call: &config.Call{Name: "spawn_subagent", Args: map[string]any{"task": task}}}
}

func dollar(text string) config.ScriptStep {
	return config.ScriptStep{Text: text, Usage: config.Usage{Input: 100_000}}
}

func TestSubagentReportsBackAndItsSpendCountsAgainstTheParent(t *testing.T) {
	t.Parallel()
	r := newRig(t, []config.ScriptStep{spawn("count the widgets in warehouse 7"), {Text: "waiting for the count"}},
		[]config.ScriptStep{dollar("42 widgets")}, background.Spec{})
	r.a.Send(inbox.Message{Kind: inbox.Wake, Text: "how many widgets?", Source: "test"})
	f := r.waitEvent(background.EventFinished)
	if f.Data["outcome"] != background.OutcomeCompleted || f.Data["cost_usd"] != 1.0 {
		t.Fatalf("finished %v", f.Data)
	}
	// The report wakes the parent: its turn sees the result.
	report := r.reportTurn("boss-sub-1")
	for _, want := range []string{"Subagent boss-sub-1 completed.", "Task: count the widgets", "> Result:\n> 42 widgets", "source: subagent:boss-sub-1"} {
		if !strings.Contains(report, want) {
			t.Fatalf("the parent's report turn lacks %q:\n%s", want, report)
		}
	}
	st, _ := r.g.Status("boss")
	if st.Session.SpentUSD < 1 {
		t.Fatalf("parent's session spend $%v, want at least the subagent's $1", st.Session.SpentUSD)
	}
}

// reportTurn waits for the parent's turn woken by subagent id and
// returns its prompt.
func (r *rig) reportTurn(id string) string {
	r.t.Helper()
	wake := `[wake: subagent "` + id + `" reported]`
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		r.mu.Lock()
		for _, p := range r.prompts {
			if strings.Contains(p, wake) {
				r.mu.Unlock()
				return p
			}
		}
		r.mu.Unlock()
		<-time.After(time.Millisecond)
	}
	r.t.Fatalf("no turn woken by %s", id)
	return ""
}

func TestSubagentCapIsToldToTheModel(t *testing.T) {
	t.Parallel()
	r := newRig(t, []config.ScriptStep{spawn("task one"), spawn("task two"), {Text: "ok"}},
		[]config.ScriptStep{{Hang: true}}, background.Spec{Max: 1})
	r.a.Send(inbox.Message{Kind: inbox.Wake, Text: "go", Source: "test"})
	r.waitEvent(events.TurnCompleted)
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.m.Running("boss"); n != 1 {
		t.Fatalf("%d running, cap 1", n)
	}
}

type quietHost struct{}

func (quietHost) ActionID(string) string            { return "" }
func (quietHost) Now() time.Time                    { return time.Now() }
func (quietHost) RequestWake(time.Time, string)     {}
func (quietHost) ReportDone(string, map[string]any) {}

func TestSubagentBudgetStopsIt(t *testing.T) {
	t.Parallel()
	step := config.ScriptStep{Call: &config.Call{Name: "report_done", Args: map[string]any{"summary": "a step"}}, Usage: config.Usage{Input: 100_000}}
	r := newRig(t, []config.ScriptStep{spawn("spend"), {Text: "ok"}},
		[]config.ScriptStep{step, step, step, dollar("done")},
		background.Spec{BudgetUSD: 1.5, Tools: func() ([]tool.Tool, error) {
			return tools.Build([]string{tools.ReportDone}, tools.Env{Host: quietHost{}})
		}})
	r.a.Send(inbox.Message{Kind: inbox.Wake, Text: "go", Source: "test"})
	f := r.waitEvent(background.EventFinished)
	if f.Data["outcome"] != background.OutcomeFailed || f.Data["cost_usd"] != 2.0 {
		t.Fatalf("a subagent with a $1.50 budget: %v (want failed after its second $1 call)", f.Data)
	}
	if p := r.reportTurn("boss-sub-1"); !strings.Contains(p, "subagent budget spent") {
		t.Fatalf("the parent was not told why:\n%s", p)
	}
}

func TestShutdownStopsSubagentsWithinTheDrain(t *testing.T) {
	t.Parallel()
	r := newRig(t, []config.ScriptStep{spawn("hang forever"), {Text: "ok"}}, []config.ScriptStep{{Hang: true}}, background.Spec{})
	r.a.Send(inbox.Message{Kind: inbox.Wake, Text: "go", Source: "test"})
	r.waitEvent(background.EventStarted)
	drain, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.m.Shutdown(drain); close(done) }()
	cancel() // the drain time is over
	select {
	case <-done:
	case <-time.After(deadline):
		t.Fatal("Shutdown did not return after the drain")
	}
	if f := r.waitEvent(background.EventFinished); f.Data["outcome"] != background.OutcomeStopped {
		t.Fatalf("finished %v", f.Data)
	}
	if _, err := r.m.Spawn("boss", "after shutdown"); err == nil {
		t.Fatal("a subagent started after shutdown")
	}
}
