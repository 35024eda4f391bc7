package history_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/agent-worker/agent-worker/history"
	"github.com/agent-worker/agent-worker/store/memstore"
)

func snapshotTexts(snap history.Snapshot) []string {
	var out []string
	for _, ev := range snap.Events {
		out = append(out, ev.Content.Parts[0].Text)
	}
	return out
}

// Window is what the model sees of the committed turns — the window less
// the folded ones — never the turn in progress, and a Commit after it
// does not change it.
func TestWindowIsASnapshotOfCommittedTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := history.New(memstore.New(nil), 3, history.KeepUntilFolded(nil))
	commitN(t, svc, 1, 4)
	svc.Folded("app", "a", "a", 2)
	turn(t, svc, 5) // in progress: a running turn's events

	snap, err := svc.Window(ctx, "app", "a", "a")
	if err != nil {
		t.Fatal(err)
	}
	want := "[prompt 3 answer 3 prompt 4 answer 4]"
	if got := fmt.Sprint(snapshotTexts(snap)); got != want || snap.Turns != 2 {
		t.Fatalf("window = %s (%d turns), want %s (2 turns): folded turns or the turn in progress are in it", got, snap.Turns, want)
	}
	if err := svc.Commit(ctx, "app", "a", "a", history.Turn{N: 5}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(snapshotTexts(snap)); got != want {
		t.Fatalf("the snapshot changed with a later Commit: %s", got)
	}
	if got := len(texts(t, svc)); got != 6 {
		t.Fatalf("the service shows %d events after the commit, want 6", got)
	}
}

// A conversation never stored is an empty snapshot, not an error.
func TestWindowOfANewConversationIsEmpty(t *testing.T) {
	t.Parallel()
	snap, err := history.New(memstore.New(nil), 3).Window(context.Background(), "app", "x", "x")
	if err != nil || len(snap.Events) != 0 || snap.Turns != 0 || snap.State == nil {
		t.Fatalf("Window of a new conversation: %+v, %v", snap, err)
	}
}
