package driver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/memory"
)

// memoryDefaults returns turn.history_turns and memory.max_tokens as a
// config that sets neither gets them.
func memoryDefaults(t testing.TB) (window, maxTokens int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	raw := "models:\n  fake: {provider: scripted, script: [{text: ok}], loop: true}\nagents:\n  - {name: tester, model: fake}\n"
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Agents[0]
	if !a.Memory.On() {
		t.Fatal("memory is off by default")
	}
	return a.Turn.HistoryTurns, a.Memory.MaxTokens
}

// withDefaultMemory is withMemory at the config's defaults.
func withDefaultMemory(t *testing.T, m *foldModel) opt {
	window, maxTokens := memoryDefaults(t)
	return func(s *Spec) {
		withMemory(m, window)(s)
		s.Memory.MaxTokens = maxTokens
	}
}

// fillWindow runs an agent at the memory defaults, folding with fm, for
// one turn more than its window holds (turn 1 names the ledger-db
// failover), so that the first fold is due, and returns it with its
// window.
func fillWindow(t *testing.T, fm *foldModel) (*harness, int) {
	t.Helper()
	h := newHarness(t, []config.ScriptStep{text("noted")}, withDefaultMemory(t, fm))
	window := h.a.spec.HistoryTurns
	h.runTurn("turn 1: the ledger-db failover is planned for sunday")
	for i := 2; i <= window+1; i++ {
		h.runTurn(fmt.Sprintf("turn %d: routine", i))
	}
	return h, window
}

// foldedTurns returns the turn numbers a fold request holds.
func foldedTurns(f *foldModel, call int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, m := range regexp.MustCompile(`<turn n="(\d+)"`).FindAllStringSubmatch(f.reqs[call-1].Contents[0].Parts[0].Text, -1) {
		out = append(out, m[1])
	}
	return out
}

// At the defaults, 100 turns cost at most 10 fold calls — folding each
// turn as it left the window made 90 — and every turn but the newest
// still ends up in the memory.
func TestFoldCallsPerHundredTurnsAtDefaults(t *testing.T) {
	t.Parallel()
	fm := newFoldModel(t)
	h := newHarness(t, []config.ScriptStep{text("noted")}, withDefaultMemory(t, fm))
	for i := 1; i <= 100; i++ {
		h.runTurn(fmt.Sprintf("alert %d", i))
		h.waitCall()
	}
	h.waitIdle()
	if n := fm.Folds(); n > 10 || n == 0 {
		t.Fatalf("%d fold calls in 100 turns at the defaults, want 1 to 10", n)
	}
	if n := h.count(events.MemoryCompactionFailed); n != 0 {
		t.Fatalf("%d failed folds", n)
	}
	v, err := h.a.Memory(context.Background())
	window, _ := memoryDefaults(t)
	if err != nil || v.Unfolded != 0 || v.Through+uint64(window) < 100 || v.Compactions != fm.Folds() {
		t.Fatalf("memory after 100 turns: %+v, %v", v, err)
	}
}

// When a turn leaves the window of 10, one fold call takes in the 10
// oldest turns, and the history keeps the newest for the model.
func TestBatchFoldTakesTurnsInOneCall(t *testing.T) {
	t.Parallel()
	fm := newFoldModel(t)
	h, window := fillWindow(t, fm)
	e := h.waitEvent(events.MemoryCompacted)
	if e.Data["turns"] != window || e.Data["through"] != uint64(window) {
		t.Fatalf("batch fold %v, want %d turns through %d", e.Data, window, window)
	}
	if n := fm.Folds(); n != 1 {
		t.Fatalf("%d fold calls, want one for the batch", n)
	}
	want := make([]string, window)
	for i := range want {
		want[i] = fmt.Sprint(i + 1)
	}
	if got := foldedTurns(fm, 1); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("the fold request holds turns %v, want %v", got, want)
	}
	h.runTurn("next")
	req := h.lastRequest()
	inputs := pastInputs(req)
	if len(inputs) != 2 || !strings.Contains(inputs[0], fmt.Sprintf("turn %d: routine", window+1)) {
		t.Fatalf("after the batch fold the prompt holds %d inputs, want turn %d and the current:\n%s", len(inputs), window+1, strings.Join(inputs, "\n====\n"))
	}
	if sys := systemText(req); !strings.Contains(sys, memory.NotesHeader) || !strings.Contains(sys, "ledger-db failover") {
		t.Fatalf("the memory of turn 1 is not in the prompt:\n%s", sys)
	}
	h.waitIdle()
	if v, err := h.a.Memory(context.Background()); err != nil || v.TurnsFolded != window || v.Unfolded != 0 || v.Compactions != 1 {
		t.Fatalf("memory view %+v, %v", v, err)
	}
}

// A batch fold that fails deletes nothing: every turn stays in the store,
// the model still sees the whole window and no memory, and the retry
// folds the batch with the turn that came meanwhile in one call.
func TestFailedBatchFoldDeletesNothing(t *testing.T) {
	t.Parallel()
	fm := newFoldModel(t)
	fm.fail = 1
	h, window := fillWindow(t, fm)
	e := h.waitEvent(events.MemoryCompactionFailed)
	if e.Data["turns"] != window || e.Data["failures"] != 1 {
		t.Fatalf("failed batch fold %v, want %d turns", e.Data, window)
	}
	h.runTurn("next") // the retry is not due yet
	req := h.lastRequest()
	if in := pastInputs(req); len(in) != window+1 {
		t.Fatalf("after a failed fold the prompt holds %d inputs, want the window of %d and the current", len(in), window)
	}
	if sys := systemText(req); strings.Contains(sys, memory.NotesHeader) {
		t.Fatalf("a failed fold left notes:\n%s", sys)
	}
	h.waitIdle()
	raw, err := h.a.store.Tail(context.Background(), "history."+AppName+".tester.tester", 0)
	if err != nil || len(raw) != window+2 {
		t.Fatalf("store holds %d turns (%v), want all %d", len(raw), err, window+2)
	}
	if v, _ := h.a.Memory(context.Background()); v.Text != "" || v.TurnsFolded != 0 || v.Unfolded != 2 || v.NextAttempt == nil {
		t.Fatalf("memory after a failed batch fold: %+v", v)
	}
	h.clock.Advance(time.Second)
	e = h.waitEvent(events.MemoryCompacted)
	if e.Data["turns"] != window+1 || e.Data["through"] != uint64(window+1) || fm.Folds() != 2 {
		t.Fatalf("retried fold %v after %d calls, want %d turns in the second call", e.Data, fm.Folds(), window+1)
	}
	if v, _ := h.a.Memory(context.Background()); !strings.Contains(v.Text, "ledger-db failover") || v.Unfolded != 0 {
		t.Fatalf("memory after the retry: %+v", v)
	}
}
