package driver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/adk/model"
	"google.golang.org/adk/plugin"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/memory"
	"github.com/agent-worker/agent-worker/models/scripted"
)

// foldModel is a scripted summariser whose folds the test can fail or
// hold.
type foldModel struct {
	*scripted.Model
	mu    sync.Mutex
	fail  int           // the next folds that fail
	hold  chan struct{} // when non-nil, folds block until it is closed
	calls chan int      // each fold's number as it starts
	reqs  []*model.LLMRequest
}

func newFoldModel(t *testing.T) *foldModel {
	t.Helper()
	f := &foldModel{calls: make(chan int, 100)}
	m, err := scripted.New("summariser", config.Model{Provider: "scripted", Behaviour: scripted.BehaviourDemo},
		scripted.WithFoldHook(func(ctx context.Context, req *model.LLMRequest, n int) error {
			f.mu.Lock()
			f.reqs = append(f.reqs, req)
			hold := f.hold
			fail := f.fail > 0
			if fail {
				f.fail--
			}
			f.mu.Unlock()
			f.calls <- n
			if fail {
				return errors.New("summariser unavailable")
			}
			if hold != nil {
				select {
				case <-hold:
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	f.Model = m
	return f
}

func withMemory(m model.LLM, window int) opt {
	return func(s *Spec) {
		s.HistoryTurns = window
		s.Memory = MemorySpec{Enabled: true, Model: m, MaxTokens: 1000}
		s.Retry = Backoff{Base: time.Second, Max: time.Second}
	}
}

// runTurn sends a wake message and waits for its turn to complete.
func (h *harness) runTurn(text string) {
	h.t.Helper()
	h.a.Send(wakeMsg(text))
	h.waitEvent(events.TurnCompleted)
}

// lastRequest returns the newest model request of a turn.
func (h *harness) lastRequest() *model.LLMRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests[len(h.requests)-1]
}

func systemText(req *model.LLMRequest) string {
	var b strings.Builder
	if req.Config != nil && req.Config.SystemInstruction != nil {
		for _, p := range req.Config.SystemInstruction.Parts {
			b.WriteString(p.Text + "\n")
		}
	}
	return b.String()
}

// pastInputs returns the turn prompts (user texts framed by the inbox) in
// req's contents, the current one included.
func pastInputs(req *model.LLMRequest) []string {
	var out []string
	for _, c := range req.Contents {
		if c.Role == genai.RoleUser && len(c.Parts) > 0 && strings.HasPrefix(c.Parts[0].Text, "[wake:") {
			out = append(out, c.Parts[0].Text)
		}
	}
	return out
}

// With history_turns 3, after 10 turns the prompt holds a memory that
// mentions turn 1 — after the instruction, marked as the agent's notes —
// and at most the 3 recent turns: folds come every third turn, each
// taking in all but the newest turn.
func TestMemoryKeepsTurnOneWithOnlyThreeRecentTurns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("noted")}, withMemory(nil, 3))
	h.runTurn("disk full on db-1")
	for i := 2; i <= 10; i++ {
		h.runTurn(fmt.Sprintf("routine check %d", i))
		if i%3 == 1 { // turn i-3 has left the window: the 3 before turn i are folded
			e := h.waitEvent(events.MemoryCompacted)
			if e.Data["through"] != uint64(i-1) || e.Data["turns"] != 3 {
				t.Fatalf("after turn %d: fold %v", i, e.Data)
			}
		}
	}
	h.runTurn("what happened first?")
	req := h.lastRequest()
	sys := systemText(req)
	notes := strings.Index(sys, memory.NotesHeader)
	if notes < 0 || notes < strings.Index(sys, "You are a test agent.") || !strings.Contains(sys[notes:], "disk full on db-1") {
		t.Fatalf("system instruction lacks the memory of turn 1 after the instruction:\n%s", sys)
	}
	inputs := pastInputs(req)
	if len(inputs) != 2 { // turn 10 (turns 1-9 are folded) and this one
		t.Fatalf("prompt holds %d turn inputs, want the 1 recent unfolded and the current:\n%s", len(inputs), strings.Join(inputs, "\n====\n"))
	}
	if !strings.Contains(inputs[0], "routine check 10") {
		t.Fatalf("the recent turn in the contents is not turn 10: %s", inputs[0])
	}
	h.waitIdle()
	v, err := h.a.Memory(context.Background())
	if err != nil || v.TurnsFolded != 9 || v.Through != 9 || v.Unfolded != 0 || v.Tokens == 0 || v.Compactions != 3 {
		t.Fatalf("memory view = %+v, %v", v, err)
	}
}

// A failing summariser loses no turn: the turns stay in the history and
// the store, the failure is said and retried after the backoff, and the
// next fold takes in everything that waited.
func TestFailingFoldLosesNoTurnAndRetries(t *testing.T) {
	t.Parallel()
	fm := newFoldModel(t)
	fm.fail = 2
	h := newHarness(t, []config.ScriptStep{text("ok")}, withMemory(fm, 2))
	h.runTurn("alpha: the certificate expires on friday")
	h.runTurn("beta")
	h.runTurn("gamma") // alpha leaves the window: alpha and beta are due
	e := h.waitEvent(events.MemoryCompactionFailed)
	if e.Data["failures"] != 1 || e.Data["turns"] != 2 {
		t.Fatalf("failure event %v", e.Data)
	}
	v, _ := h.a.Memory(context.Background())
	if v.LastError == "" || v.Unfolded != 1 || v.Text != "" || v.NextAttempt == nil {
		t.Fatalf("after a failed fold: %+v", v)
	}
	h.runTurn("delta") // beta leaves too; no fold before the retry is due
	h.waitIdle()
	if n := len(fm.calls); n != 1 {
		t.Fatalf("%d folds before the retry was due, want 1", n)
	}
	raw, err := h.a.store.Tail(context.Background(), "history."+AppName+".tester.tester", 0)
	if err != nil || len(raw) != 4 {
		t.Fatalf("store holds %d turns (%v), want all 4: none deleted unfolded", len(raw), err)
	}
	h.clock.Advance(time.Second)
	if e := h.waitEvent(events.MemoryCompactionFailed); e.Data["failures"] != 2 || e.Data["turns"] != 3 {
		t.Fatalf("second failure %v", e.Data)
	}
	h.clock.Advance(2 * time.Second)
	e = h.waitEvent(events.MemoryCompacted)
	if e.Data["turns"] != 3 || e.Data["through"] != uint64(3) {
		t.Fatalf("retried fold %v", e.Data)
	}
	v, _ = h.a.Memory(context.Background())
	if !strings.Contains(v.Text, "the certificate expires on friday") || v.LastError != "" || v.Failures != 0 || v.Unfolded != 0 || v.TurnsFolded != 3 {
		t.Fatalf("memory after the retry: %+v", v)
	}
}

// fakeLedger is a guard that takes charges and halts the agent at a
// ceiling, as guard.Guard does.
type fakeLedger struct {
	mu      sync.Mutex
	ctl     hook.Control
	spent   float64
	ceiling float64
	tripped bool
}

func (l *fakeLedger) Attach(_ string, ctl hook.Control)           { l.ctl = ctl }
func (l *fakeLedger) Restore(context.Context, string) error       { return nil }
func (l *fakeLedger) BeginTurn(string, hook.TurnInfo)             {}
func (l *fakeLedger) EndTurn(string)                              {}
func (l *fakeLedger) Plugin(string) *plugin.Plugin                { return nil }
func (l *fakeLedger) Admit(_ context.Context, agent string) error { return l.admit() }

func (l *fakeLedger) admit() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tripped {
		return errors.New("session ceiling reached")
	}
	return nil
}

func (l *fakeLedger) Charge(_ string, usd float64) {
	l.mu.Lock()
	l.spent += usd
	trip := !l.tripped && l.spent >= l.ceiling
	l.tripped = l.tripped || trip
	l.mu.Unlock()
	if trip {
		l.ctl.Halt("session ceiling reached")
	}
}

// A fold is charged to the agent's ledger; a ceiling it crosses halts the
// agent, and a halted agent does not fold.
func TestFoldChargedAndHaltedAgentDoesNotFold(t *testing.T) {
	t.Parallel()
	fm := newFoldModel(t)
	led := &fakeLedger{ceiling: 0.25}
	h := newHarnessWith(t, []config.ScriptStep{text("ok")}, func(d *Deps) { d.Guards = []hook.Guard{led} },
		withMemory(fm, 1), func(s *Spec) { s.Memory.Cost = func(*model.LLMResponse) float64 { return 0.1 } })
	h.runTurn("one")
	h.runTurn("two")
	h.waitEvent(events.MemoryCompacted)
	h.runTurn("three")
	h.waitEvent(events.MemoryCompacted)
	h.runTurn("four")
	h.waitEvent(events.MemoryCompacted) // 0.30: the ceiling is crossed
	if n := h.count(events.Halted); n != 1 {
		t.Fatalf("%d halted events after the fold that crossed the ceiling", n)
	}
	led.mu.Lock()
	spent := led.spent
	led.mu.Unlock()
	if spent < 0.29 || spent > 0.31 {
		t.Fatalf("ledger charged $%.2f for 3 folds at $0.10, want $0.30", spent)
	}
	// Turns no longer run; a fold the retry timer or a forced request
	// would start is refused.
	if _, err := h.a.CompactMemory(context.Background(), hook.Audit{By: "ops"}); !errors.Is(err, hook.ErrHalted) {
		t.Fatalf("forced fold of a halted agent: %v", err)
	}
	h.a.poke()
	h.waitIdle()
	if n := len(fm.calls); n != 3 {
		t.Fatalf("%d folds, want 3: a halted agent folded", n)
	}
}

// A forced fold takes in every turn, the window's too; a clear empties the
// memory, names who cleared it, and the next prompt has no notes.
func TestForcedFoldAndClear(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("ok")}, withMemory(nil, 5))
	h.runTurn("the backup job runs at 02:00")
	h.runTurn("second")
	h.waitIdle()
	if v, _ := h.a.Memory(context.Background()); v.Unfolded != 0 || v.Text != "" {
		t.Fatalf("folded before anything left the window: %+v", v)
	}
	v, err := h.a.CompactMemory(context.Background(), hook.Audit{By: "ops", Reason: "shrink"})
	if err != nil || (!v.Queued && v.TurnsFolded == 0) {
		t.Fatalf("CompactMemory = %+v, %v", v, err)
	}
	e := h.waitEvent(events.MemoryCompacted)
	if e.Data["forced"] != true || e.Data["turns"] != 2 {
		t.Fatalf("forced fold %v", e.Data)
	}
	h.runTurn("third")
	req := h.lastRequest()
	if in := pastInputs(req); len(in) != 1 || !strings.Contains(systemText(req), "the backup job runs at 02:00") {
		t.Fatalf("after a forced fold: %d inputs, system:\n%s", len(in), systemText(req))
	}

	v, err = h.a.ClearMemory(context.Background(), hook.Audit{By: "ops", Reason: "wrong facts"})
	if err != nil || v.Text != "" || v.TurnsFolded != 0 || v.ClearedBy != "ops" || v.Through != 2 {
		t.Fatalf("ClearMemory = %+v, %v", v, err)
	}
	e = h.waitEvent(events.MemoryCleared)
	if e.Data["by"] != "ops" || e.Data["reason"] != "wrong facts" || e.Data["turns_folded"] != 2 {
		t.Fatalf("memory-cleared %v", e.Data)
	}
	h.runTurn("fourth")
	if sys := systemText(h.lastRequest()); strings.Contains(sys, memory.NotesHeader) {
		t.Fatalf("notes still in the prompt after a clear:\n%s", sys)
	}
	// The stored record is empty too: a restarted owner finds it so.
	var rec memory.Record
	if found, err := h.a.load(context.Background(), "memory", &rec); !found || err != nil || rec.Text != "" || rec.ClearedBy != "ops" {
		t.Fatalf("stored memory %+v (found %v, %v)", rec, found, err)
	}
}

// A wake that arrives while a fold runs waits for that fold only: its
// turn starts as soon as the one model call returns.
func TestWakeWaitsForOneFoldAtMost(t *testing.T) {
	t.Parallel()
	fm := newFoldModel(t)
	fm.hold = make(chan struct{})
	h := newHarness(t, []config.ScriptStep{text("ok")}, withMemory(fm, 1))
	h.runTurn("one")
	h.a.Send(wakeMsg("two"))
	h.waitEvent(events.TurnCompleted) // two; one leaves the window
	<-fm.calls                        // the fold of turn one runs, held
	h.a.Send(wakeMsg("three"))
	if s := h.a.Status(); s.State == Running {
		t.Fatal("a turn runs during a fold")
	}
	turns := h.count(events.TurnStarted)
	fm.mu.Lock()
	close(fm.hold)
	fm.hold = nil
	fm.mu.Unlock()
	h.waitEvent(events.TurnCompleted) // three: right after that fold
	h.drainEvents()
	var order []string
	for _, e := range h.seen {
		if e.Type == events.TurnStarted || e.Type == events.MemoryCompacted {
			order = append(order, e.Type)
		}
	}
	third := 0
	for i, typ := range order {
		if typ == events.TurnStarted {
			third = i
		}
	}
	if third < 1 || order[third-1] != events.MemoryCompacted || h.count(events.TurnStarted) != turns+1 {
		t.Fatalf("the third turn did not start right after the held fold: %v", order)
	}
}

// The memory survives a restart: the new driver loads it, places it in
// the prompt and does not fold the same turns again.
func TestMemorySurvivesRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("ok")}, withMemory(nil, 1))
	h.runTurn("the pager rotation changes on monday")
	h.runTurn("two")
	h.waitEvent(events.MemoryCompacted)
	h.waitIdle()
	st := h.a.store
	h.d.Shutdown(context.Background())

	m, _ := scripted.New("fake", config.Model{Provider: "scripted", Script: []config.ScriptStep{text("ok")}, Loop: true})
	spec := Spec{Name: "tester", Model: m, Instruction: "You are a test agent.", Tools: []string{"schedule_next_turn"}}
	spec.Sleep.Max = time.Hour
	withMemory(nil, 1)(&spec)
	d, err := New(Deps{Clock: h.clock, Store: st}, []Spec{spec})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	a, _ := d.Agent("tester")
	end := time.Now().Add(deadline)
	for {
		v, err := a.Memory(context.Background())
		if err == nil && strings.Contains(v.Text, "the pager rotation changes on monday") && v.Through == 1 && v.Unfolded == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("memory after restart: %+v, %v", v, err)
		}
		<-time.After(time.Millisecond)
	}
	if s := a.Status(); s.Turns < 2 {
		t.Fatalf("turn counter after restart %d, want 2", s.Turns)
	}
}
