package memory_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"testing"
	"time"

	"google.golang.org/adk/model"
	"google.golang.org/adk/session"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/memory"
	"github.com/agent-worker/agent-worker/models/scripted"
)

// turnOf builds a recorded turn: a framed prompt with one message, the
// model's reply and a tool call with its result.
func turnOf(n uint64, message, reply string) memory.Turn {
	in := session.NewEvent("inv")
	in.Author = "user"
	in.Content = genai.NewContentFromText(fmt.Sprintf("[wake: inbox]\n--- message 1 of 1 · from ops · subject alerts\n%s\n---", message), genai.RoleUser)
	out := session.NewEvent("inv")
	out.Author = "agent"
	out.Content = &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{
		genai.NewPartFromText(reply),
		{FunctionCall: &genai.FunctionCall{Name: "schedule_next_turn", Args: map[string]any{"wake_in_seconds": 300}}},
	}}
	res := session.NewEvent("inv")
	res.Author = "agent"
	res.Content = &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{
		{FunctionResponse: &genai.FunctionResponse{Name: "schedule_next_turn", Response: map[string]any{"wake_at": "later"}}},
	}}
	return memory.Turn{N: n, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Events: []*session.Event{in, out, res}}
}

func summariser(t *testing.T, maxTokens int) (memory.Summariser, *scripted.Model) {
	t.Helper()
	m, err := scripted.New("sum", config.Model{Provider: "scripted", Behaviour: scripted.BehaviourDemo})
	if err != nil {
		t.Fatal(err)
	}
	return memory.Summariser{Agent: "oncall", Model: m, MaxTokens: maxTokens}, m
}

// The scripted summariser reads the request package memory writes: the
// facts of a folded turn reach the memory, and the earliest survive many
// folds while the memory stays within max_tokens.
func TestScriptedSummariserKeepsFirstFactsWithinBound(t *testing.T) {
	t.Parallel()
	s, m := summariser(t, 150)
	text := ""
	for n := uint64(1); n <= 40; n++ {
		f, err := s.Fold(context.Background(), text, []memory.Turn{turnOf(n, fmt.Sprintf("disk full on db-%d", n), fmt.Sprintf("Cleaned logs on db-%d.", n))})
		if err != nil {
			t.Fatal(err)
		}
		if f.Turns != 1 || f.Through != n {
			t.Fatalf("fold %d: took %d turns through %d", n, f.Turns, f.Through)
		}
		if f.Response == nil || f.Response.UsageMetadata == nil || f.Response.UsageMetadata.PromptTokenCount == 0 {
			t.Fatalf("fold %d: no usage to price it by: %+v", n, f.Response)
		}
		text = f.Text
		if memory.Tokens(text) > 150 {
			t.Fatalf("fold %d: memory of %d tokens exceeds max_tokens 150:\n%s", n, memory.Tokens(text), text)
		}
	}
	for _, want := range []string{`"disk full on db-1"`, `I said: "Cleaned logs on db-1."`, `"disk full on db-40"`, "more turns, details dropped for space", "schedule_next_turn"} {
		if !strings.Contains(text, want) {
			t.Errorf("memory lacks %q:\n%s", want, text)
		}
	}
	if m.Folds() != 40 || m.Calls() != 0 {
		t.Fatalf("scripted model counted %d folds and %d calls, want 40 and 0", m.Folds(), m.Calls())
	}
}

// One fold sends what fits MaxInputBytes — at least one turn — and says
// how many it took; the rest wait.
func TestFoldTakesTheOldestTurnsThatFit(t *testing.T) {
	t.Parallel()
	s, _ := summariser(t, 1000)
	s.MaxInputBytes = 1500
	var turns []memory.Turn
	for n := uint64(1); n <= 5; n++ {
		turns = append(turns, turnOf(n, strings.Repeat("x", 400), "ok"))
	}
	f, err := s.Fold(context.Background(), "", turns)
	if err != nil {
		t.Fatal(err)
	}
	if f.Turns < 1 || f.Turns >= 5 || f.Through != uint64(f.Turns) {
		t.Fatalf("took %d turns through %d from 5 of ~600 bytes with a 1500-byte budget", f.Turns, f.Through)
	}
	s.MaxInputBytes = 10
	if f, err := s.Fold(context.Background(), "", turns); err != nil || f.Turns != 1 {
		t.Fatalf("with a budget below one turn: took %d (%v), want 1", f.Turns, err)
	}
	req, n := s.Request("earlier notes", turns[:1])
	body := req.Contents[0].Parts[0].Text
	if n != 1 || !strings.HasPrefix(req.Config.SystemInstruction.Parts[0].Text, memory.RequestMarker) ||
		!strings.Contains(body, memory.MemoryOpen+"\nearlier notes\n"+memory.MemoryClose) || !strings.Contains(body, `<turn n="1" at="2026-01-02T03:04:05Z">`) ||
		req.Config.MaxOutputTokens != 1000 {
		t.Fatalf("request: n=%d, system %q, max output %d, body:\n%s", n, req.Config.SystemInstruction.Parts[0].Text, req.Config.MaxOutputTokens, body)
	}
}

// fixed is a model.LLM that answers every call with text, or err.
type fixed struct {
	text string
	err  error
}

func (f fixed) Name() string { return "fixed" }
func (f fixed) GenerateContent(context.Context, *model.LLMRequest, bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		if f.err != nil {
			yield(nil, f.err)
			return
		}
		if !yield(&model.LLMResponse{Partial: true, Content: genai.NewContentFromText("partial ", genai.RoleModel)}, nil) {
			return
		}
		yield(&model.LLMResponse{Content: genai.NewContentFromText(f.text, genai.RoleModel)}, nil)
	}
}

// A model that writes more than max_tokens is cut and marked; one that
// fails or writes nothing folds nothing.
func TestFoldBoundsAndFailures(t *testing.T) {
	t.Parallel()
	turns := []memory.Turn{turnOf(7, "m", "r")}
	long := memory.Summariser{Model: fixed{text: strings.Repeat("word ", 400)}, MaxTokens: 50}
	f, err := long.Fold(context.Background(), "", turns)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Clipped || memory.Tokens(f.Text) > 50 || !strings.HasSuffix(f.Text, memory.ClippedMark) || strings.Contains(f.Text, "partial") {
		t.Fatalf("clipped=%v, %d tokens: %q", f.Clipped, memory.Tokens(f.Text), f.Text)
	}
	boom := errors.New("provider down")
	if _, err := (memory.Summariser{Model: fixed{err: boom}}).Fold(context.Background(), "", turns); !errors.Is(err, boom) {
		t.Fatalf("failing model: %v", err)
	}
	if _, err := (memory.Summariser{Model: fixed{text: "  "}}).Fold(context.Background(), "", turns); !errors.Is(err, memory.ErrEmpty) {
		t.Fatalf("empty answer: %v", err)
	}
	if _, err := (memory.Summariser{Model: fixed{text: "x"}}).Fold(context.Background(), "", nil); err == nil {
		t.Fatal("a fold of no turns succeeded")
	}
}

// The notes go after the agent's instruction, in the system instruction,
// marked as the agent's own; an empty memory adds nothing.
func TestAddNotesFollowsTheInstruction(t *testing.T) {
	t.Parallel()
	req := &model.LLMRequest{Config: &genai.GenerateContentConfig{SystemInstruction: genai.NewContentFromText("You triage alerts.", genai.RoleUser)},
		Contents: []*genai.Content{genai.NewContentFromText("turn", genai.RoleUser)}}
	memory.AddNotes(req, "")
	if len(req.Config.SystemInstruction.Parts) != 1 {
		t.Fatal("an empty memory added a part")
	}
	memory.AddNotes(req, "- turn 1: db-1 disk full")
	parts := req.Config.SystemInstruction.Parts
	if len(parts) != 2 || parts[0].Text != "You triage alerts." || !strings.HasPrefix(parts[1].Text, memory.NotesHeader) || !strings.Contains(parts[1].Text, "db-1 disk full") {
		t.Fatalf("system instruction parts: %+v", parts)
	}
	if len(req.Contents) != 1 {
		t.Fatal("notes went into the contents")
	}
	bare := &model.LLMRequest{}
	memory.AddNotes(bare, "x")
	if bare.Config == nil || bare.Config.SystemInstruction == nil {
		t.Fatal("no system instruction created")
	}
}
