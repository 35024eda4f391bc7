package history_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/adk/model"
	"google.golang.org/adk/session"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/history"
	"github.com/agent-worker/agent-worker/store/memstore"
)

func turn(t *testing.T, svc *history.Service, i int) {
	t.Helper()
	ctx := context.Background()
	got, err := svc.Get(ctx, &session.GetRequest{AppName: "app", UserID: "a", SessionID: "a"})
	var sess session.Session
	if err != nil {
		c, cerr := svc.Create(ctx, &session.CreateRequest{AppName: "app", UserID: "a", SessionID: "a"})
		if cerr != nil {
			t.Fatal(cerr)
		}
		sess = c.Session
	} else {
		sess = got.Session
	}
	for _, e := range []struct{ role, text string }{{"user", fmt.Sprintf("prompt %d", i)}, {"model", fmt.Sprintf("answer %d", i)}} {
		ev := session.NewEvent(fmt.Sprintf("inv-%d", i))
		ev.Author = "a"
		ev.LLMResponse = model.LLMResponse{Content: genai.NewContentFromText(e.text, genai.Role(e.role))}
		if err := svc.AppendEvent(ctx, sess, ev); err != nil {
			t.Fatal(err)
		}
	}
	if sess.Events().Len() == 0 {
		t.Fatal("AppendEvent did not extend the session the runner holds")
	}
}

func texts(t *testing.T, svc *history.Service) []string {
	t.Helper()
	got, err := svc.Get(context.Background(), &session.GetRequest{AppName: "app", UserID: "a", SessionID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for ev := range got.Session.Events().All() {
		out = append(out, ev.Content.Parts[0].Text)
	}
	return out
}

func TestWindowKeepsNewestTurnsAndSurvivesRestart(t *testing.T) {
	t.Parallel()
	st := memstore.New(nil)
	svc := history.New(st, 3)
	for i := 1; i <= 10; i++ {
		turn(t, svc, i)
		if err := svc.Commit(context.Background(), "app", "a", "a", history.Turn{}); err != nil {
			t.Fatal(err)
		}
	}
	want := "[prompt 8 answer 8 prompt 9 answer 9 prompt 10 answer 10]"
	if got := fmt.Sprint(texts(t, svc)); got != want {
		t.Fatalf("window = %s, want %s", got, want)
	}
	// A new service over the same store is a restarted worker.
	restarted := history.New(st, 3)
	if got := fmt.Sprint(texts(t, restarted)); got != want {
		t.Fatalf("after restart = %s, want %s", got, want)
	}
	raw, _ := st.Tail(context.Background(), "history.app.a.a", 0)
	if len(raw) != 3 {
		t.Fatalf("store holds %d turns, want 3 (history is bounded)", len(raw))
	}
}

func TestDiscardForgetsTurnInProgress(t *testing.T) {
	t.Parallel()
	svc := history.New(memstore.New(nil), 5)
	turn(t, svc, 1)
	if err := svc.Commit(context.Background(), "app", "a", "a", history.Turn{}); err != nil {
		t.Fatal(err)
	}
	turn(t, svc, 2)
	if got := len(texts(t, svc)); got != 4 {
		t.Fatalf("pending turn invisible within the turn: %d events", got)
	}
	svc.Discard("app", "a", "a")
	if got := fmt.Sprint(texts(t, svc)); got != "[prompt 1 answer 1]" {
		t.Fatalf("after Discard = %s", got)
	}
}

func TestGetMissingSessionFails(t *testing.T) {
	t.Parallel()
	svc := history.New(memstore.New(nil), 5)
	if _, err := svc.Get(context.Background(), &session.GetRequest{AppName: "app", UserID: "x", SessionID: "x"}); err == nil {
		t.Fatal("Get of a session never created nor stored succeeded")
	}
	if _, err := svc.Create(context.Background(), &session.CreateRequest{AppName: "app", UserID: "x", SessionID: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(context.Background(), &session.CreateRequest{AppName: "app", UserID: "x", SessionID: "x"}); err == nil {
		t.Fatal("second Create succeeded")
	}
}

func TestCommitKeepsNumberIDsAndShortenedInputAcrossRestart(t *testing.T) {
	t.Parallel()
	st := memstore.New(nil)
	svc := history.New(st, 3)
	ctx := context.Background()
	c, err := svc.Create(ctx, &session.CreateRequest{AppName: "app", UserID: "a", SessionID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	in := session.NewEvent("inv-1")
	in.Author = "user"
	in.LLMResponse = model.LLMResponse{Content: genai.NewContentFromText("a very long prompt "+strings.Repeat("x", 10000), genai.RoleUser)}
	out := session.NewEvent("inv-1")
	out.Author = "a"
	out.LLMResponse = model.LLMResponse{Content: genai.NewContentFromText("answer", genai.RoleModel)}
	for _, ev := range []*session.Event{in, out} {
		if err := svc.AppendEvent(ctx, c.Session, ev); err != nil {
			t.Fatal(err)
		}
	}
	short := genai.NewContentFromText("a very long prompt [clipped]", genai.RoleUser)
	if err := svc.Commit(ctx, "app", "a", "a", history.Turn{N: 41, Messages: []string{"m-1", "m-2"}, Input: short}); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*history.Service{"live": svc, "restarted": history.New(st, 3)} {
		if got := fmt.Sprint(texts(t, s)); got != "[a very long prompt [clipped] answer]" {
			t.Errorf("%s window = %s", name, got)
		}
		recent, err := s.Recent(ctx, "app", "a", "a")
		if err != nil || len(recent) != 1 || recent[0].N != 41 || fmt.Sprint(recent[0].Messages) != "[m-1 m-2]" {
			t.Errorf("%s Recent = %+v, %v", name, recent, err)
		}
	}
}

func TestOversizedTurnIsClippedNotRefused(t *testing.T) {
	t.Parallel()
	st := memstore.New(nil)
	svc := history.New(st, 3)
	ctx := context.Background()
	c, err := svc.Create(ctx, &session.CreateRequest{AppName: "app", UserID: "a", SessionID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("log line\n", history.MaxRecordBytes/4) // 2.25 × the limit
	call := session.NewEvent("inv-1")
	call.Author = "a"
	call.LLMResponse = model.LLMResponse{Content: &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{
		{FunctionResponse: &genai.FunctionResponse{Name: "http_get", Response: map[string]any{"body": huge}}},
	}}}
	say := session.NewEvent("inv-1")
	say.Author = "a"
	say.LLMResponse = model.LLMResponse{Content: genai.NewContentFromText("summary: "+huge, genai.RoleModel)}
	for _, ev := range []*session.Event{call, say} {
		if err := svc.AppendEvent(ctx, c.Session, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := svc.Commit(ctx, "app", "a", "a", history.Turn{N: 1}); err != nil {
		t.Fatalf("an oversized turn was refused: %v", err)
	}
	raw, _ := st.Tail(ctx, "history.app.a.a", 0)
	if len(raw) != 1 || len(raw[0]) > history.MaxRecordBytes {
		t.Fatalf("stored record: %d records, %d bytes (limit %d)", len(raw), len(raw[0]), history.MaxRecordBytes)
	}
	if !strings.Contains(string(raw[0]), "summary: log line") || !strings.Contains(string(raw[0]), "clipped in the history") {
		t.Fatal("the clipped record lost its start or its mark")
	}
	if len(say.Content.Parts[0].Text) < 2*history.MaxRecordBytes {
		t.Fatal("clipping changed the live event the run still holds")
	}
}
