package scheduler

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/store"
)

// owns is a replica's ownership of every agent, switchable.
type owns struct{ yes atomic.Bool }

func (o *owns) Owns(string) bool { return o.yes.Load() }

func (o *owns) Fence(string) (store.Fence, bool) { return store.Fence{}, o.yes.Load() }

// TestOnlyTheOwnerWritesTimers: two schedulers share a store, as two
// replicas do. The one that does not own the agent never writes its
// timer or claims its ticks: the owner's stored timer stays, and its
// schedule ticks are left to the owner.
func TestOnlyTheOwnerWritesTimers(t *testing.T) {
	t.Parallel()
	r := newRig()
	ctx := context.Background()
	ownerOf, standbyOf := &owns{}, &owns{}
	ownerOf.yes.Store(true)
	mk := func(o Owner, tg Target) *Scheduler {
		s := New(Options{Store: r.store, Clock: r.clock, Owner: o})
		if err := s.Add("a", tg, []Schedule{every("q", "*/10 * * * *", "")}); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		return s
	}
	owner, standby := mk(ownerOf, &target{}), &target{}
	other := mk(standbyOf, standby)

	at := start.Add(time.Hour)
	owner.SetTimer("a", at, false)
	e, err := r.store.Get(ctx, timerKey("a"))
	if err != nil {
		t.Fatal(err)
	}
	other.SetTimer("a", start.Add(5*time.Minute), true)
	if err := other.persistTimer("a", nil); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("a standby deleting the timer: %v", err)
	}
	if now, err := r.store.Get(ctx, timerKey("a")); err != nil || now.Revision != e.Revision {
		t.Fatalf("a standby wrote the owner's timer: %+v, %v", now, err)
	}
	// Neither the standby's own timer nor its schedule's ticks fire there
	// (its target's gate says it may run: only the Owner stops it).
	r.clock.Advance(10 * time.Minute)
	if n := standby.count(); n != 0 {
		t.Fatalf("the standby fired %d times: %+v", n, standby.fires)
	}
}
