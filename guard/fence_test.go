package guard_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// owner is a replica's ownership of agents, changeable in a test.
type owner struct {
	mu  sync.Mutex
	own map[string]bool
}

func (o *owner) Owns(agent string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.own[agent]
}

func (o *owner) Fence(agent string) (store.Fence, bool) { return store.Fence{}, o.Owns(agent) }

func (o *owner) set(agent string, own bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.own[agent] = own
}

func stored(t *testing.T, st store.Store, key string) []byte {
	t.Helper()
	e, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return e.Value
}

// TestOnlyTheOwnerWritesTheLedger: two guards share a store, as two
// replicas do. The standby's ledger — never restored — is never written:
// Reset, Charge and Trip there change nothing stored and Reset says why
// (ErrNotOwner). An owner that has not loaded the ledger yet refuses too
// (ErrNotLoaded), and an owner that lost the agent stops writing and must
// reload before it writes again.
func TestOnlyTheOwnerWritesTheLedger(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	st := memstore.New(c)
	ctx := context.Background()
	limits := guard.Limits{SessionUSD: 2}
	ownA, ownB := &owner{own: map[string]bool{"a": true}}, &owner{own: map[string]bool{}}
	a := guard.New(guard.Options{Store: st, Clock: c, Prices: guard.NewPrices(prices), Owner: ownA})
	b := guard.New(guard.Options{Store: st, Clock: c, Prices: guard.NewPrices(prices), Owner: ownB})
	a.AddAgent("a", "priced-1", limits)
	b.AddAgent("a", "priced-1", limits)

	if err := a.Restore(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	a.Charge("a", 2) // reaches the $2 session ceiling: tripped, stored
	before := stored(t, st, "guard.a")
	if !bytes.Contains(before, []byte(`"session_spent_usd":2`)) || !bytes.Contains(before, []byte(`"trip"`)) {
		t.Fatalf("stored ledger %s", before)
	}

	// The standby: its empty ledger would let a reset through at $0.
	_, err := b.Reset("a", guard.Session, 0)
	if !errors.Is(err, guard.ErrNotOwner) {
		t.Fatalf("standby reset: %v", err)
	}
	b.Charge("a", 0.5)
	b.Trip("a", guard.Watchdog, "loop")
	if after := stored(t, st, "guard.a"); !bytes.Equal(after, before) {
		t.Fatalf("a standby wrote the owner's ledger:\nbefore %s\nafter  %s", before, after)
	}

	// b becomes the owner, but has not loaded the ledger yet.
	ownA.set("a", false)
	ownB.set("a", true)
	if _, err := b.Reset("a", guard.Session, 5); !errors.Is(err, guard.ErrNotLoaded) {
		t.Fatalf("reset before restore: %v", err)
	}
	if err := b.Restore(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	var refused *guard.RefusedError
	if _, err := b.Reset("a", guard.Session, 0); !errors.As(err, &refused) || refused.Spent != 2 {
		t.Fatalf("reset on the new owner must refuse with the stored spend: %v", err)
	}
	// a, deposed, charges on (a subagent finishing): nothing is written.
	a.Charge("a", 1)
	if after := stored(t, st, "guard.a"); !bytes.Equal(after, before) {
		t.Fatalf("a deposed owner wrote the ledger:\nbefore %s\nafter  %s", before, after)
	}
	res, err := b.Reset("a", guard.Session, 5)
	if err != nil || !res.Cleared || res.SpentUSD != 2 {
		t.Fatalf("reset with budget on the owner: %+v, %v", res, err)
	}
	// a wins the agent back. Having seen that it lost it (the refused
	// write), it holds its old ledger stale until it reloads.
	ownB.set("a", false)
	ownA.set("a", true)
	if _, err := a.Reset("a", guard.Session, 1); !errors.Is(err, guard.ErrNotLoaded) {
		t.Fatalf("reset from a stale ledger: %v", err)
	}
	if err := a.Restore(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if s, _ := a.Status("a"); s.Session.SpentUSD != 2 || s.Session.CeilingUSD != 7 || s.Trip != nil {
		t.Fatalf("reloaded ledger %+v", s)
	}
}
