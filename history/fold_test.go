package history_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/agent-worker/agent-worker/history"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// commitN commits turns from..to of conversation a/a, numbered.
func commitN(t *testing.T, svc *history.Service, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		turn(t, svc, i)
		if err := svc.Commit(context.Background(), "app", "a", "a", history.Turn{N: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
}

func unfolded(t *testing.T, svc *history.Service, all bool) []uint64 {
	t.Helper()
	held, err := svc.Unfolded(context.Background(), "app", "a", "a", all)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, h := range held {
		if len(h.Events) != 2 || h.At.IsZero() {
			t.Fatalf("turn %d held with %d events at %v", h.N, len(h.Events), h.At)
		}
		out = append(out, h.N)
	}
	return out
}

// Turns leaving the window stay in the store until they are folded, and
// only then are trimmed; the model sees the window alone throughout.
func TestKeepUntilFoldedHoldsTurnsLeavingTheWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.New(nil)
	svc := history.New(st, 2, history.KeepUntilFolded(nil))
	commitN(t, svc, 1, 5)
	if got := fmt.Sprint(texts(t, svc)); got != "[prompt 4 answer 4 prompt 5 answer 5]" {
		t.Fatalf("window = %s", got)
	}
	if got := unfolded(t, svc, false); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("unfolded = %v, want [1 2 3]", got)
	}
	if raw, _ := st.Tail(ctx, "history.app.a.a", 0); len(raw) != 5 {
		t.Fatalf("store holds %d turns, want 5: unfolded turns were trimmed", len(raw))
	}
	// A restarted worker finds them too (no watermark known yet).
	if got := unfolded(t, history.New(st, 2, history.KeepUntilFolded(nil)), false); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("after restart unfolded = %v", got)
	}

	svc.Folded("app", "a", "a", 2)
	if got := unfolded(t, svc, false); !slices.Equal(got, []uint64{3}) {
		t.Fatalf("after Folded(2) unfolded = %v, want [3]", got)
	}
	commitN(t, svc, 6, 6)
	raw, _ := st.Tail(ctx, "history.app.a.a", 0)
	if len(raw) != 4 {
		t.Fatalf("store holds %d turns after the next commit, want 4 (3 unfolded, 4 and 5 left the window, 6)", len(raw))
	}
	svc.Folded("app", "a", "a", 4)
	commitN(t, svc, 7, 7)
	if raw, _ := st.Tail(ctx, "history.app.a.a", 0); len(raw) != 3 {
		t.Fatalf("store holds %d turns, want 3 (5 left the window unfolded, 6, 7)", len(raw))
	}
	svc.Folded("app", "a", "a", 6) // 6 leaves the window with turn 8
	commitN(t, svc, 8, 8)
	if raw, _ := st.Tail(ctx, "history.app.a.a", 0); len(raw) != 2 {
		t.Fatalf("store holds %d turns once all that left the window are folded, want 2", len(raw))
	}
	if got := fmt.Sprint(texts(t, svc)); got != "[prompt 7 answer 7 prompt 8 answer 8]" {
		t.Fatalf("window = %s", got)
	}
}

// A forced fold takes in the window too: folded turns leave the model's
// view at once, though the store keeps the window's records.
func TestFoldedWindowTurnsLeaveTheView(t *testing.T) {
	t.Parallel()
	svc := history.New(memstore.New(nil), 3, history.KeepUntilFolded(nil))
	commitN(t, svc, 1, 4)
	if got := unfolded(t, svc, true); !slices.Equal(got, []uint64{1, 2, 3, 4}) {
		t.Fatalf("all unfolded = %v", got)
	}
	svc.Folded("app", "a", "a", 3)
	if got := fmt.Sprint(texts(t, svc)); got != "[prompt 4 answer 4]" {
		t.Fatalf("view after folding through 3 = %s", got)
	}
	if n := svc.Turns("app", "a", "a"); n != 1 {
		t.Fatalf("Turns = %d, want 1", n)
	}
	recent, err := svc.Recent(context.Background(), "app", "a", "a")
	if err != nil || len(recent) != 4 {
		t.Fatalf("Recent = %d turns (%v), want 4: the window's folded turns (and turn 1, until the next commit) are still held, their message ids still count as handled", len(recent), err)
	}
}

// When summaries fail for so long that the window and the unfolded turns
// exceed what the store keeps, the oldest are trimmed after all — and
// reported, never silently.
func TestUnfoldedBeyondStoreBoundAreReported(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var lost []uint64
	st := memstore.New(nil)
	svc := history.New(st, 60, history.KeepUntilFolded(func(app, user, id string, turns []uint64) {
		mu.Lock()
		defer mu.Unlock()
		lost = append(lost, turns...)
	}))
	commitN(t, svc, 1, history.MaxStoredTurns+3)
	mu.Lock()
	got := slices.Clone(lost)
	mu.Unlock()
	if !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("reported lost turns %v, want [1 2 3]", got)
	}
	raw, _ := st.Tail(context.Background(), "history.app.a.a", 0)
	if len(raw) != history.MaxStoredTurns {
		t.Fatalf("store holds %d turns, want %d", len(raw), history.MaxStoredTurns)
	}
	if u := unfolded(t, svc, false); len(u) != history.MaxStoredTurns-60 || u[0] != 4 {
		t.Fatalf("unfolded = %v", u)
	}
}

// Without KeepUntilFolded nothing changes: the window alone is kept, and
// only a forced fold finds anything to fold.
func TestWithoutKeepUntilFoldedOnlyTheWindowIsKept(t *testing.T) {
	t.Parallel()
	st := memstore.New(nil)
	svc := history.New(st, 2)
	commitN(t, svc, 1, 4)
	if got := unfolded(t, svc, false); len(got) != 0 {
		t.Fatalf("unfolded = %v, want none", got)
	}
	if got := unfolded(t, svc, true); !slices.Equal(got, []uint64{3, 4}) {
		t.Fatalf("all unfolded = %v, want [3 4]", got)
	}
	if raw, _ := st.Tail(context.Background(), "history.app.a.a", 0); len(raw) != 2 {
		t.Fatalf("store holds %d turns, want 2", len(raw))
	}
}
