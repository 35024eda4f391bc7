package tools

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/adk/model"
)

// reportHost records the reports of one agent.
type reportHost struct {
	quiet
	mu      sync.Mutex
	reports []string
}

func (h *reportHost) ReportDone(summary string, _ map[string]any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reports = append(h.reports, summary)
}

func (h *reportHost) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.reports...)
}

// Agents share one built tool, yet each agent's call acts on its own
// host: through its tool, and through what its tool offers the model
// (the request's tool table, which ADK's flow runs calls from).
func TestASharedToolActsForTheAgentWhoseToolIsCalled(t *testing.T) {
	t.Parallel()
	a, b := &reportHost{}, &reportHost{}
	ta, err := Build([]string{ReportDone, ScheduleNextTurn}, Env{Host: a, Sleep: Sleep{Max: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := Build([]string{ReportDone, ScheduleNextTurn}, Env{Host: b, Sleep: Sleep{Max: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if ta[0].(*bound).shared != tb[0].(*bound).shared {
		t.Fatal("two agents' report_done tools were built twice")
	}
	if _, err := ta[0].(runnable).Run(toolCtx{}, map[string]any{"summary": "from a"}); err != nil {
		t.Fatal(err)
	}
	req := &model.LLMRequest{}
	for _, tl := range tb {
		if err := tl.(*bound).ProcessRequest(nil, req); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(req.Config.Tools[0].FunctionDeclarations); n != 2 {
		t.Fatalf("the request declares %d functions; want 2", n)
	}
	if _, err := req.Tools[ReportDone].(runnable).Run(toolCtx{}, map[string]any{"summary": "from b"}); err != nil {
		t.Fatal(err)
	}
	if got := a.got(); len(got) != 1 || got[0] != "from a" {
		t.Fatalf("agent a's host got %q; want only its own report", got)
	}
	if got := b.got(); len(got) != 1 || got[0] != "from b" {
		t.Fatalf("agent b's host got %q; want only its own report", got)
	}
	if err := tb[0].(*bound).ProcessRequest(nil, req); err == nil {
		t.Fatal("a tool offered twice in one request: no error")
	}
}

// A tool whose description differs (here: other sleep bounds) is a tool
// of its own: the model is told each agent's bounds.
func TestAToolWithAnotherDescriptionIsBuiltApart(t *testing.T) {
	t.Parallel()
	ta, err := Build([]string{ScheduleNextTurn}, Env{Host: quiet{}, Sleep: Sleep{Min: time.Minute, Max: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := Build([]string{ScheduleNextTurn}, Env{Host: quiet{}, Sleep: Sleep{Max: 2 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if ta[0].Description() == tb[0].Description() {
		t.Fatalf("both agents are told %q", ta[0].Description())
	}
}
