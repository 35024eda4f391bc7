package turnlog_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
	"github.com/agent-worker/agent-worker/turnlog"
)

const deadline = 20 * time.Second

func flush(t *testing.T, l *turnlog.Log) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// The list keeps the newest Keep turns, newest first, each cut to its
// bounds with the counts of what was cut.
func TestRecentIsNewestFirstAndBounded(t *testing.T) {
	t.Parallel()
	st := memstore.New(nil)
	l := turnlog.New(st, nil)
	for n := uint64(1); n <= turnlog.Keep+6; n++ {
		tr := turnlog.Turn{N: n, Outcome: turnlog.OutcomeCompleted, Text: strings.Repeat("é", 5000)}
		for i := range 60 {
			tr.Messages = append(tr.Messages, turnlog.Message{ID: strings.Repeat("i", 300) + string(rune('a'+i%26))})
		}
		for range 30 {
			tr.ToolCalls = append(tr.ToolCalls, turnlog.ToolCall{Name: "publish", Args: `{"text":"` + strings.Repeat("a", 1000) + `"}`, Outcome: turnlog.ToolOK})
		}
		l.Record("a", tr, nil)
	}
	flush(t, l)
	got, err := l.Recent(t.Context(), "a", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != turnlog.Keep || got[0].N != turnlog.Keep+6 || got[len(got)-1].N != 7 {
		t.Fatalf("%d turns, newest %d, oldest %d", len(got), got[0].N, got[len(got)-1].N)
	}
	tr := got[0]
	if utf8.RuneCountInString(tr.Text) != turnlog.MaxText || !strings.HasSuffix(tr.Text, "…") {
		t.Errorf("text of %d runes", utf8.RuneCountInString(tr.Text))
	}
	if len(tr.Messages) != turnlog.MaxMessages || tr.MessageCount != 60 || utf8.RuneCountInString(tr.Messages[0].ID) != turnlog.MaxField {
		t.Errorf("%d messages listed of %d, id of %d runes", len(tr.Messages), tr.MessageCount, utf8.RuneCountInString(tr.Messages[0].ID))
	}
	if len(tr.ToolCalls) != turnlog.MaxToolCalls || tr.ToolCallCount != 30 || utf8.RuneCountInString(tr.ToolCalls[0].Args) != turnlog.MaxArgs {
		t.Errorf("%d tool calls listed of %d, args of %d runes", len(tr.ToolCalls), tr.ToolCallCount, utf8.RuneCountInString(tr.ToolCalls[0].Args))
	}
	if got, _ := l.Recent(t.Context(), "a", 2); len(got) != 2 || got[0].N != turnlog.Keep+6 {
		t.Errorf("Recent(2): %d turns", len(got))
	}
	if tr, ok, err := l.Find(t.Context(), "a", 10); !ok || err != nil || tr.N != 10 {
		t.Errorf("Find(10): %v %v %v", tr.N, ok, err)
	}
	if _, ok, _ := l.Find(t.Context(), "a", 3); ok {
		t.Error("Find(3): a turn beyond Keep was still found")
	}
	if got, _ := l.Recent(t.Context(), "b", 10); len(got) != 0 {
		t.Errorf("another agent's list holds %d turns", len(got))
	}
}

// A summary is written only while its writer owns the agent.
func TestRecordIsFencedByOwnership(t *testing.T) {
	t.Parallel()
	st := memstore.New(nil)
	l := turnlog.New(st, nil)
	old, _ := st.Put(t.Context(), "lease.a", []byte("r1"))
	if _, err := st.Put(t.Context(), "lease.a", []byte("r2")); err != nil {
		t.Fatal(err)
	}
	l.Record("a", turnlog.Turn{N: 1}, func() (store.Writer, bool) { return nil, false })
	l.Record("a", turnlog.Turn{N: 2}, func() (store.Writer, bool) { return st, true })
	// Under a lease that has moved since: the store refuses it.
	l.Record("a", turnlog.Turn{N: 3}, func() (store.Writer, bool) {
		return st.Fenced(store.Fence{Key: "lease.a", Revision: old}), true
	})
	flush(t, l)
	got, err := l.Recent(t.Context(), "a", 10)
	if err != nil || len(got) != 1 || got[0].N != 2 {
		t.Fatalf("turns %+v, %v", got, err)
	}
}

// A dead-letter lookup finds the record of the id, for its agent only;
// the first record of an id stands, and one without an id is not kept.
func TestDeadLettered(t *testing.T) {
	t.Parallel()
	l := turnlog.New(memstore.New(nil), nil)
	ctx := t.Context()
	at := time.Now().UTC()
	l.DeadLetter("a", turnlog.DeadLetter{ID: "bad", Reason: "invalid_json", Detail: "first", At: at}, 0)
	l.DeadLetter("a", turnlog.DeadLetter{ID: "bad", Reason: "too_large", Detail: "second", At: at}, 0)
	l.DeadLetter("a", turnlog.DeadLetter{Reason: "no id"}, 0)
	flush(t, l)
	d, err := l.DeadLettered(ctx, "a", "bad")
	if err != nil || d == nil || d.Reason != "invalid_json" || d.Detail != "first" {
		t.Fatalf("bad: %+v, %v", d, err)
	}
	for _, c := range []struct{ agent, id string }{{"a", "nobody"}, {"b", "bad"}, {"a", ""}} {
		if d, err := l.DeadLettered(ctx, c.agent, c.id); d != nil || err != nil {
			t.Errorf("%s/%s: %+v, %v", c.agent, c.id, d, err)
		}
	}
}

// FindMessage finds a message among completed turns only: a failed
// turn's messages went back to the inbox.
func TestFindMessageSeesCompletedTurnsOnly(t *testing.T) {
	t.Parallel()
	l := turnlog.New(memstore.New(nil), nil)
	l.Record("a", turnlog.Turn{N: 1, Outcome: "failed", Messages: []turnlog.Message{{ID: "m"}}}, nil)
	l.Record("a", turnlog.Turn{N: 2, Outcome: turnlog.OutcomeCompleted, Messages: []turnlog.Message{{ID: "m"}}}, nil)
	l.Record("a", turnlog.Turn{N: 3, Outcome: "failed", Messages: []turnlog.Message{{ID: "m"}, {ID: "x"}}}, nil)
	flush(t, l)
	if tr, ok, err := l.FindMessage(t.Context(), "a", "m"); !ok || err != nil || tr.N != 2 {
		t.Errorf("m: turn %d, %v, %v", tr.N, ok, err)
	}
	if _, ok, _ := l.FindMessage(t.Context(), "a", "x"); ok {
		t.Error("x was found in a failed turn")
	}
}

// blockingStore holds every Append until released.
type blockingStore struct {
	store.Store
	release chan struct{}
	once    sync.Once
	started chan struct{}
}

func (s *blockingStore) Append(ctx context.Context, list string, v []byte, keep int) error {
	s.once.Do(func() { close(s.started) })
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.Append(ctx, list, v, keep)
}

// While the store is slow each agent has at most MaxPending writes
// waiting: beyond, the oldest waiting one is dropped, and the order of the
// rest is kept.
func TestPendingWritesAreBounded(t *testing.T) {
	t.Parallel()
	st := &blockingStore{Store: memstore.New(nil), release: make(chan struct{}), started: make(chan struct{})}
	l := turnlog.New(st, nil)
	l.Record("a", turnlog.Turn{N: 1}, nil)
	<-st.started // turn 1 is being written; the rest wait
	total := turnlog.MaxPending + 10
	for n := uint64(2); n <= uint64(total); n++ {
		l.Record("a", turnlog.Turn{N: n}, nil)
	}
	close(st.release)
	flush(t, l)
	got, err := l.Recent(t.Context(), "a", turnlog.Keep)
	if err != nil {
		t.Fatal(err)
	}
	// Kept: turn 1 (already being written) and the newest MaxPending.
	if len(got) != turnlog.MaxPending || got[0].N != uint64(total) || got[len(got)-1].N != uint64(total-turnlog.MaxPending+1) {
		t.Fatalf("%d turns, newest %d, oldest %d", len(got), got[0].N, got[len(got)-1].N)
	}
}
