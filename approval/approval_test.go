package approval_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/approval"
	"github.com/agent-worker/agent-worker/store/memory"
)

// A request held twice (a resumed turn) is one request; Take returns it
// once, and the concurrent Takes of one id give it to exactly one caller.
func TestHoldIsIdempotentAndTakeIsOnce(t *testing.T) {
	t.Parallel()
	st, ctx := memory.New(nil), t.Context()
	r := approval.Request{ID: "oncall-t3-c1", Agent: "oncall", Tool: "restart", Args: map[string]any{"name": "api"}, Turn: 3,
		Requested: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), Expires: time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)}
	for i, want := range []bool{true, false} {
		created, err := approval.Hold(ctx, st, r)
		if err != nil || created != want {
			t.Fatalf("hold %d: created %v %v, want %v", i, created, err, want)
		}
	}
	list, err := approval.List(ctx, st, "oncall")
	if err != nil || len(list) != 1 || list[0].Args["name"] != "api" || !list[0].Expires.Equal(r.Expires) {
		t.Fatalf("list %+v %v", list, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	got, unknown := 0, 0
	for range 8 {
		wg.Go(func() {
			_, err := approval.Take(ctx, st, "oncall", r.ID)
			mu.Lock()
			defer mu.Unlock()
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
	st, ctx := memory.New(nil), t.Context()
	for i := range approval.MaxPending {
		if _, err := approval.Hold(ctx, st, approval.Request{ID: string(rune('a'+i%26)) + string(rune('0'+i/26)), Agent: "a", Tool: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := approval.Hold(ctx, st, approval.Request{ID: "one-more", Agent: "a", Tool: "x"}); !errors.Is(err, approval.ErrFull) {
		t.Fatalf("hold past the bound: %v", err)
	}
}
