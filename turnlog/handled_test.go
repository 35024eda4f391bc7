package turnlog_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/store/memory"
	"github.com/agent-worker/agent-worker/turnlog"
)

// The record keeps the newest keep ids, none older than its ttl, and
// answers with the turn that handled each; its size is bounded by keep,
// not by how many messages were handled.
func TestHandledRecordIsBounded(t *testing.T) {
	t.Parallel()
	st := memory.New(nil)
	ctx := t.Context()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for turn := range uint64(30) {
		batch := make([]turnlog.Handled, 10)
		for i := range batch {
			batch[i] = turnlog.Handled{ID: fmt.Sprintf("m-%d", int(turn)*10+i), Turn: turn + 1, At: now}
		}
		if err := turnlog.RecordHandled(ctx, st, "a", batch, 100, time.Hour, now); err != nil {
			t.Fatal(err)
		}
	}
	e, err := st.Get(ctx, turnlog.HandledSetKey("a"))
	if err != nil {
		t.Fatal(err)
	}
	if max := 9 + 100*32; len(e.Value) > max {
		t.Fatalf("record is %d bytes after 300 ids, want at most %d (100 kept)", len(e.Value), max)
	}
	for _, c := range []struct {
		id   string
		ok   bool
		turn uint64
	}{{"m-299", true, 30}, {"m-200", true, 21}, {"m-199", false, 0}, {"m-0", false, 0}, {"never", false, 0}} {
		h, ok, err := turnlog.LookupHandled(ctx, st, "a", c.id, now)
		if err != nil || ok != c.ok || h.Turn != c.turn || (ok && (h.ID != c.id || !h.At.Equal(now))) {
			t.Errorf("%s: %+v %v %v, want ok %v turn %d", c.id, h, ok, err, c.ok, c.turn)
		}
	}
	// An id older than the ttl is forgotten by lookups at once, and by the
	// record at its next write.
	later := now.Add(time.Hour)
	if _, ok, _ := turnlog.LookupHandled(ctx, st, "a", "m-299", later); ok {
		t.Fatal("an id older than the ttl still counts as handled")
	}
	if err := turnlog.RecordHandled(ctx, st, "a", []turnlog.Handled{{ID: "fresh", Turn: 31, At: later}}, 100, time.Hour, later); err != nil {
		t.Fatal(err)
	}
	if e, _ := st.Get(ctx, turnlog.HandledSetKey("a")); len(e.Value) != 9+32 {
		t.Fatalf("record is %d bytes after the expired ids were written over, want one entry", len(e.Value))
	}
	if _, ok, _ := turnlog.LookupHandled(ctx, st, "b", "fresh", later); ok {
		t.Fatal("another agent's record answered")
	}
}

// Writers racing on one record (two replicas during a handover, parallel
// settles) lose no id: each write is a compare-and-set over the record it
// read.
func TestHandledRecordConcurrentWritersLoseNothing(t *testing.T) {
	t.Parallel()
	st := memory.New(nil)
	now := time.Now()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 20 {
				if err := turnlog.RecordHandled(t.Context(), st, "a", []turnlog.Handled{{ID: fmt.Sprintf("w%d-%d", w, i), Turn: 1, At: now}}, 0, 0, now); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for w := range 8 {
		for i := range 20 {
			if _, ok, err := turnlog.LookupHandled(t.Context(), st, "a", fmt.Sprintf("w%d-%d", w, i), now); !ok || err != nil {
				t.Fatalf("w%d-%d lost: %v", w, i, err)
			}
		}
	}
}

// A record this version cannot read is replaced by the next write, and a
// lookup says what is wrong instead of answering "not handled".
func TestHandledRecordUnreadable(t *testing.T) {
	t.Parallel()
	st := memory.New(nil)
	ctx := t.Context()
	if _, err := st.Put(ctx, turnlog.HandledSetKey("a"), []byte(`{"not":"a record"}`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := turnlog.LookupHandled(ctx, st, "a", "x", time.Now()); err == nil {
		t.Fatal("an unreadable record answered without an error")
	}
	if err := turnlog.RecordHandled(ctx, st, "a", []turnlog.Handled{{ID: "x", At: time.Now()}}, 0, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := turnlog.LookupHandled(ctx, st, "a", "x", time.Now()); !ok || err != nil {
		t.Fatalf("after a write: %v %v", ok, err)
	}
}
