package journal_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/journal"
	"github.com/agent-worker/agent-worker/store/memstore"
)

func call(id, name string) *model.LLMResponse {
	return &model.LLMResponse{
		Content:       &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{ID: id, Name: name, Args: map[string]any{"subject": "ops.reports"}}}}},
		UsageMetadata: &genai.GenerateContentResponseUsageMetadata{PromptTokenCount: 100, CandidatesTokenCount: 7},
	}
}

// A saved journal loads back with its steps in order, found by model step
// and by tool call, usage included (a replay reports the same tokens).
func TestJournalRoundTrip(t *testing.T) {
	t.Parallel()
	st := memstore.New(nil)
	ctx := t.Context()
	if j, err := journal.Load(ctx, st, "a"); err != nil || j != nil {
		t.Fatalf("no journal yet: got %v, %v", j, err)
	}
	j := &journal.Journal{Turn: 7, Started: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), Messages: []string{"m1", "m2"}, Durable: []string{"m1"}, Prompt: "hello"}
	j.AddModel(call("c1", "publish"))
	j.AddResult("c1", "publish", map[string]any{"published": true})
	j.AddModel(&model.LLMResponse{Content: genai.NewContentFromText("done", genai.RoleModel)})
	if err := journal.Save(ctx, st, "a", j); err != nil {
		t.Fatal(err)
	}
	got, err := journal.Load(ctx, st, "a")
	if err != nil || got == nil {
		t.Fatalf("load: %v, %v", got, err)
	}
	if got.Turn != 7 || got.Prompt != "hello" || len(got.Messages) != 2 || got.ModelSteps() != 2 {
		t.Fatalf("loaded %+v", got)
	}
	first := got.Model(0).LLMResponse()
	if fc := first.Content.Parts[0].FunctionCall; fc == nil || fc.ID != "c1" || fc.Name != "publish" || fc.Args["subject"] != "ops.reports" {
		t.Fatalf("first response %+v", first.Content.Parts[0])
	}
	if first.UsageMetadata == nil || first.UsageMetadata.PromptTokenCount != 100 {
		t.Fatalf("usage lost: %+v", first.UsageMetadata)
	}
	if got.Model(1).Content.Parts[0].Text != "done" || got.Model(2) != nil {
		t.Fatal("model steps out of order")
	}
	if r, ok := got.Result("c1", "publish"); !ok || r["published"] != true {
		t.Fatalf("result %v %v", r, ok)
	}
	if _, ok := got.Result("c1", "http_get"); ok {
		t.Fatal("a result is matched by call id and tool both")
	}
	if err := journal.Delete(ctx, st, "a"); err != nil {
		t.Fatal(err)
	}
	if j, _ := journal.Load(ctx, st, "a"); j != nil {
		t.Fatal("deleted journal still loads")
	}
}

// A large tool result is clipped as it is recorded and says so; a
// journal above MaxBytes is refused whole, nothing written.
func TestJournalIsBounded(t *testing.T) {
	t.Parallel()
	st := memstore.New(nil)
	ctx := t.Context()
	j := &journal.Journal{Turn: 1, Prompt: "p"}
	j.AddResult("c1", "http_get", map[string]any{"body": strings.Repeat("x", 100_000)})
	s := j.Steps[0]
	if !s.Clipped || !strings.Contains(s.Result["note"].(string), "100") || len(s.Result["clipped"].(string)) > journal.ResultClip {
		t.Fatalf("not clipped: clipped=%v note=%v", s.Clipped, s.Result["note"])
	}
	if err := journal.Save(ctx, st, "a", j); err != nil {
		t.Fatalf("a clipped journal saves: %v", err)
	}
	big := &journal.Journal{Turn: 2, Prompt: strings.Repeat("y", journal.MaxBytes)}
	if err := journal.Save(ctx, st, "a", big); !errors.Is(err, journal.ErrTooLarge) {
		t.Fatalf("oversized journal: %v", err)
	}
	if got, _ := journal.Load(ctx, st, "a"); got == nil || got.Turn != 1 {
		t.Fatalf("the refused save overwrote the journal: %+v", got)
	}
}

func TestJournalUnreadable(t *testing.T) {
	t.Parallel()
	st := memstore.New(nil)
	if _, err := st.Put(t.Context(), journal.Key("a"), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if _, err := journal.Load(t.Context(), st, "a"); err == nil || !strings.Contains(err.Error(), "unreadable") {
		t.Fatalf("unreadable journal: %v", err)
	}
}

// Action ids name agent, turn and call, and nothing else: the same inputs
// give the same id (a resume), any other input another.
func TestActionIDIsDeterministic(t *testing.T) {
	t.Parallel()
	a := journal.ActionID("oncall", 7, "call_1")
	if a != journal.ActionID("oncall", 7, "call_1") {
		t.Fatal("not deterministic")
	}
	for _, other := range []string{journal.ActionID("oncall", 8, "call_1"), journal.ActionID("oncall", 7, "call_2"), journal.ActionID("triage", 7, "call_1")} {
		if other == a {
			t.Fatalf("%q names two actions", a)
		}
	}
}
