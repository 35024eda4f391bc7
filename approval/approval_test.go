package approval_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/approval"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// A request held twice (a resumed turn) is one request; of concurrent
// Settles of one id exactly one gets it.
func TestHoldIsIdempotentAndSettleIsOnce(t *testing.T) {
	t.Parallel()
	st, ctx := memstore.New(nil), t.Context()
	r := approval.Request{ID: "oncall-t3-c1", Agent: "oncall", Tool: "restart", Args: map[string]any{"name": "api"}, Turn: 3,
		Requested: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), Expires: time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)}
	for i, want := range []bool{true, false} {
		created, err := approval.Hold(ctx, st, st, r)
		if err != nil || created != want {
			t.Fatalf("hold %d: created %v %v, want %v", i, created, err, want)
		}
	}
	list, err := approval.List(ctx, st, "oncall")
	if err != nil || len(list) != 1 || list[0].Args["name"] != "api" || !list[0].Expires.Equal(r.Expires) {
		t.Fatalf("list %+v %v", list, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex // the owner serialises its writes of a book
	got, unknown := 0, 0
	for range 8 {
		wg.Go(func() {
			mu.Lock()
			defer mu.Unlock()
			_, err := approval.Settle(ctx, st, st, "oncall", r.ID, func(approval.Request) approval.Notice { return approval.Notice{Message: "decided"} }, r.Requested)
			switch {
			case err == nil:
				got++
			case errors.Is(err, approval.ErrUnknown):
				unknown++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got != 1 || unknown != 7 {
		t.Fatalf("%d takes got it, %d were told unknown; want 1 and 7", got, unknown)
	}
	if list, _ := approval.List(ctx, st, "oncall"); len(list) != 0 {
		t.Fatalf("still pending: %+v", list)
	}
}

func TestHoldIsBounded(t *testing.T) {
	t.Parallel()
	st, ctx := memstore.New(nil), t.Context()
	for i := range approval.MaxPending {
		if _, err := approval.Hold(ctx, st, st, approval.Request{ID: string(rune('a'+i%26)) + string(rune('0'+i/26)), Agent: "a", Tool: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := approval.Hold(ctx, st, st, approval.Request{ID: "one-more", Agent: "a", Tool: "x"}); !errors.Is(err, approval.ErrFull) {
		t.Fatalf("hold past the bound: %v", err)
	}
}

// Settle takes the request and records its notice in one write; Notify
// replaces the notice; Delivered removes it.
func TestNoticesStayUntilDelivered(t *testing.T) {
	t.Parallel()
	st, ctx := memstore.New(nil), t.Context()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	if _, err := approval.Hold(ctx, st, st, approval.Request{ID: "x1", Agent: "a", Tool: "restart"}); err != nil {
		t.Fatal(err)
	}
	r, err := approval.Settle(ctx, st, st, "a", "x1", func(r approval.Request) approval.Notice {
		return approval.Notice{Message: "approved " + r.Tool + ": started"}
	}, at)
	if err != nil || r.Tool != "restart" {
		t.Fatalf("settle: %+v %v", r, err)
	}
	if _, err := approval.Settle(ctx, st, st, "a", "x1", func(approval.Request) approval.Notice { return approval.Notice{Message: "again"} }, at); !errors.Is(err, approval.ErrUnknown) {
		t.Fatalf("settling twice: %v", err)
	}
	if err := approval.Notify(ctx, st, st, "a", approval.Notice{ID: "x1", Message: "approved restart: done", Data: `{"restarted":true}`, At: at}); err != nil {
		t.Fatal(err)
	}
	n, err := approval.Notices(ctx, st, "a")
	if err != nil || len(n) != 1 || n[0].Message != "approved restart: done" || n[0].Data != `{"restarted":true}` {
		t.Fatalf("notices %+v %v", n, err)
	}
	if list, _ := approval.List(ctx, st, "a"); len(list) != 0 {
		t.Fatalf("still pending after Settle: %+v", list)
	}
	if err := approval.Delivered(ctx, st, st, "a", []string{"x1"}); err != nil {
		t.Fatal(err)
	}
	if n, _ := approval.Notices(ctx, st, "a"); len(n) != 0 {
		t.Fatalf("notices after delivery: %+v", n)
	}
}

// A write under a lease that has moved changes nothing: the next owner's
// book stands.
func TestWritesUnderAMovedFenceChangeNothing(t *testing.T) {
	t.Parallel()
	st, ctx := memstore.New(nil), t.Context()
	old, _ := st.Put(ctx, "lease.a", []byte("r1"))
	stale := st.Fenced(store.Fence{Key: "lease.a", Revision: old})
	if _, err := approval.Hold(ctx, st, stale, approval.Request{ID: "x1", Agent: "a", Tool: "restart"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "lease.a", []byte("r2")); err != nil {
		t.Fatal(err)
	}
	if _, err := approval.Hold(ctx, st, stale, approval.Request{ID: "x2", Agent: "a", Tool: "restart"}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("hold under a moved fence: err = %v, want ErrFenced", err)
	}
	if _, err := approval.Settle(ctx, st, stale, "a", "x1", func(approval.Request) approval.Notice { return approval.Notice{} }, time.Now()); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("settle under a moved fence: err = %v, want ErrFenced", err)
	}
	if list, _ := approval.List(ctx, st, "a"); len(list) != 1 || list[0].ID != "x1" {
		t.Fatalf("pending after refused writes: %+v, want x1 alone", list)
	}
}
