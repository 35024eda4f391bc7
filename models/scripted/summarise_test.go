package scripted

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/adk/model"
	"google.golang.org/adk/session"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/memory"
)

// The summariser reads the request package memory writes: the two agree
// on its shape.
func TestFoldShapeIsPackageMemorys(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ here, there string }{
		{foldMarker, memory.RequestMarker}, {foldMemoryOpen, memory.MemoryOpen}, {foldMemoryEnd, memory.MemoryClose},
		{foldTurnEnd, memory.TurnClose}, {foldInput, memory.SectionInput}, {foldReply, memory.SectionReply},
	} {
		if c.here != c.there {
			t.Errorf("scripted reads %q where package memory writes %q", c.here, c.there)
		}
	}
}

// A fold takes no script step and is not a call: a script written for
// the agent's turns plays the same however often the driver folds; the
// fold hook can make the summariser fail.
func TestFoldTakesNoScriptStep(t *testing.T) {
	t.Parallel()
	boom := errors.New("summariser down")
	m, err := New("s", config.Model{Provider: "scripted", Script: []config.ScriptStep{Text("only step", 1, 1)}},
		WithFoldHook(func(_ context.Context, _ *model.LLMRequest, n int) error {
			if n == 2 {
				return boom
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	in := session.NewEvent("inv")
	in.Author = "user"
	in.Content = genai.NewContentFromText("[wake: operator]", genai.RoleUser)
	s := memory.Summariser{Agent: "a", Model: m}
	turns := []memory.Turn{{N: 1, Events: []*session.Event{in}}}
	f, err := s.Fold(context.Background(), "", turns)
	if err != nil || !strings.Contains(f.Text, "- turn 1: Woke for: operator.") {
		t.Fatalf("fold = %q, %v", f.Text, err)
	}
	if _, err := s.Fold(context.Background(), f.Text, turns); !errors.Is(err, boom) {
		t.Fatalf("fold with a failing hook: %v", err)
	}
	for resp, err := range m.GenerateContent(context.Background(), &model.LLMRequest{}, false) {
		if err != nil || resp.Content.Parts[0].Text != "only step" {
			t.Fatalf("the turn's call after two folds got %+v, %v", resp, err)
		}
	}
	if m.Calls() != 1 || m.Folds() != 2 {
		t.Fatalf("calls %d, folds %d; want 1 and 2", m.Calls(), m.Folds())
	}
}
