// Package storetest is the conformance suite every store.Store
// implementation runs, so the memory, NATS and Redis stores promise the
// same things.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/store"
)

// Backend describes the store under test.
type Backend struct {
	// New returns an empty store; the suite closes it.
	New func(t *testing.T) store.Store
	// Elapse makes at least d pass for the store's expiry, by advancing a
	// fake clock or waiting on the real one.
	Elapse func(t *testing.T, d time.Duration)
}

// ttl is the expiry the suite's TTL tests use: the shortest a real server
// accepts (NATS message TTLs are whole seconds, at least one), so a suite
// against a real backend waits on its clock for about two seconds in all.
const ttl = time.Second

// Run runs the conformance suite.
func Run(t *testing.T, b Backend) {
	su := suite{ctx: context.Background(), b: b}
	t.Run("GetPutDelete", su.getPutDelete)
	t.Run("CreateIsSetIfAbsent", su.createIsSetIfAbsent)
	t.Run("CreateRaceHasOneWinner", su.createRaceHasOneWinner)
	t.Run("CreateTTLExpires", su.createTTLExpires)
	t.Run("UpdateDropsTTL", su.updateDropsTTL)
	t.Run("UpdateComparesRevision", su.updateComparesRevision)
	t.Run("UpdateRaceHasOneWinner", su.updateRaceHasOneWinner)
	t.Run("RevisionsIncreaseAcrossDelete", su.revisionsIncreaseAcrossDelete)
	t.Run("ListsAreBoundedAndOrdered", su.listsAreBoundedAndOrdered)
	t.Run("CancelledContextFails", su.cancelledContextFails)
	t.Run("ClosedStoreRefuses", su.closedStoreRefuses)
	t.Run("ValuesAreCopied", su.valuesAreCopied)
	t.Run("FencedWritesLandWhileTheFenceHolds", su.fencedWritesLand)
	t.Run("FencedWritesRefusedOnceTheFenceMoved", su.fencedWritesRefused)
	t.Run("ClaimRefusesAFenceThatMoved", su.claimRefusesMoved)
	t.Run("FencedAppendsRacingAMove", su.fencedAppendsRacingAMove)
}

// suite is what every case of Run needs: a context and the backend.
type suite struct {
	ctx context.Context
	b   Backend
}

// fresh is a new, empty store, closed when t ends.
func (su suite) fresh(t *testing.T) store.Store {
	s := su.b.New(t)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// getPutDelete: Put raises the revision, Get reads the latest, Delete is idempotent.
func (su suite) getPutDelete(t *testing.T) {
	ctx := su.ctx
	s := su.fresh(t)
	if _, err := s.Get(ctx, "a.b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get missing: err = %v, want ErrNotFound", err)
	}
	r1, err := s.Put(ctx, "a.b", []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.Put(ctx, "a.b", []byte("two"))
	if err != nil {
		t.Fatal(err)
	}
	if r2 <= r1 {
		t.Fatalf("revisions %d then %d: want increasing", r1, r2)
	}
	e, err := s.Get(ctx, "a.b")
	if err != nil || string(e.Value) != "two" || e.Revision != r2 {
		t.Fatalf("Get = %q rev %d, %v; want two rev %d", e.Value, e.Revision, err, r2)
	}
	if err := s.Delete(ctx, "a.b"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "a.b"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	if _, err := s.Get(ctx, "a.b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after Delete: err = %v", err)
	}
}

// createIsSetIfAbsent: Create refuses an existing key and works again after Delete.
func (su suite) createIsSetIfAbsent(t *testing.T) {
	ctx := su.ctx
	s := su.fresh(t)
	if _, err := s.Create(ctx, "claim.x", []byte("first"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "claim.x", []byte("second"), 0); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second Create: err = %v, want ErrExists", err)
	}
	e, _ := s.Get(ctx, "claim.x")
	if string(e.Value) != "first" {
		t.Fatalf("value = %q, want first", e.Value)
	}
	if err := s.Delete(ctx, "claim.x"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "claim.x", []byte("again"), 0); err != nil {
		t.Fatalf("Create after Delete: %v", err)
	}
}

// createRaceHasOneWinner: of concurrent Creates of one key, exactly one wins.
func (su suite) createRaceHasOneWinner(t *testing.T) {
	ctx := su.ctx
	s := su.fresh(t)
	const n = 16
	var wg sync.WaitGroup
	wins := make(chan int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Create(ctx, "claim.race", []byte(fmt.Sprint(i)), time.Minute); err == nil {
				wins <- i
			} else if !errors.Is(err, store.ErrExists) {
				t.Errorf("Create: %v", err)
			}
		}()
	}
	wg.Wait()
	close(wins)
	if got := len(wins); got != 1 {
		t.Fatalf("%d winners, want 1", got)
	}
}

// createTTLExpires: a Create ttl expires the key, revisions keep increasing
// across the expiry, and keys without a ttl (or Put over one) stay.
func (su suite) createTTLExpires(t *testing.T) {
	ctx := su.ctx
	s := su.fresh(t)
	r1, err := s.Create(ctx, "lease.y", []byte("v"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	// Keys that must outlive the ttl: one created without a ttl, and
	// one whose ttl a Put dropped.
	if _, err := s.Create(ctx, "claim.forever", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "lease.put", []byte("v"), ttl); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "lease.put", []byte("put")); err != nil {
		t.Fatal(err)
	}
	su.b.Elapse(t, ttl)
	if _, err := s.Get(ctx, "lease.y"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after expiry: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Update(ctx, "lease.y", []byte("late"), r1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Update of an expired key: err = %v, want ErrNotFound", err)
	}
	r2, err := s.Create(ctx, "lease.y", []byte("w"), ttl)
	if err != nil {
		t.Fatalf("Create after expiry: %v", err)
	}
	// The old holder's revision must not match the new holder's:
	// revisions keep increasing across an expiry (fencing).
	if r2 <= r1 {
		t.Fatalf("revision %d after expiry, %d before: want increasing", r2, r1)
	}
	if _, err := s.Update(ctx, "lease.y", []byte("late"), r1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Update with the expired holder's revision: err = %v, want ErrConflict", err)
	}
	if _, err := s.Get(ctx, "claim.forever"); err != nil {
		t.Fatalf("Get of a key created without a ttl: %v", err)
	}
	if e, err := s.Get(ctx, "lease.put"); err != nil || string(e.Value) != "put" {
		t.Fatalf("Get of a key Put over a ttl = %q, %v; want put (Put drops the ttl)", e.Value, err)
	}
}

// updateDropsTTL: an Update keeps the key past its Create ttl.
func (su suite) updateDropsTTL(t *testing.T) {
	ctx := su.ctx
	s := su.fresh(t)
	r1, err := s.Create(ctx, "lease.u", []byte("v1"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "lease.u", []byte("v2"), r1); err != nil {
		t.Fatal(err)
	}
	su.b.Elapse(t, ttl)
	e, err := s.Get(ctx, "lease.u")
	if err != nil || string(e.Value) != "v2" {
		t.Fatalf("Get after the Create ttl passed = %q, %v; want v2 (Update drops the ttl)", e.Value, err)
	}
}

// updateComparesRevision: Update needs the current revision.
func (su suite) updateComparesRevision(t *testing.T) {
	ctx := su.ctx
	s := su.fresh(t)
	if _, err := s.Update(ctx, "cas.z", []byte("v"), 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Update missing: err = %v, want ErrNotFound", err)
	}
	r1, _ := s.Put(ctx, "cas.z", []byte("v1"))
	r2, err := s.Update(ctx, "cas.z", []byte("v2"), r1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "cas.z", []byte("v3"), r1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale Update: err = %v, want ErrConflict", err)
	}
	e, _ := s.Get(ctx, "cas.z")
	if string(e.Value) != "v2" || e.Revision != r2 {
		t.Fatalf("value %q rev %d, want v2 rev %d", e.Value, e.Revision, r2)
	}
}

// updateRaceHasOneWinner: of concurrent Updates from one revision, exactly
// one wins and its value stays.
func (su suite) updateRaceHasOneWinner(t *testing.T) {
	ctx := su.ctx
	s := su.fresh(t)
	r, err := s.Put(ctx, "cas.race", []byte("start"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	wins := make(chan int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Update(ctx, "cas.race", []byte(fmt.Sprint(i)), r); err == nil {
				wins <- i
			} else if !errors.Is(err, store.ErrConflict) {
				t.Errorf("Update: %v", err)
			}
		}()
	}
	wg.Wait()
	close(wins)
	if got := len(wins); got != 1 {
		t.Fatalf("%d winners, want 1", got)
	}
	e, _ := s.Get(ctx, "cas.race")
	if winner := <-wins; string(e.Value) != fmt.Sprint(winner) {
		t.Fatalf("value %q, want the winner's %d", e.Value, winner)
	}
}

// revisionsIncreaseAcrossDelete: a revision from before a Delete never
// matches the key created again.
func (su suite) revisionsIncreaseAcrossDelete(t *testing.T) {
	ctx := su.ctx
	s := su.fresh(t)
	r1, err := s.Put(ctx, "gone.k", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "gone.k"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "gone.k", []byte("late"), r1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Update of a deleted key: err = %v, want ErrNotFound", err)
	}
	r2, err := s.Create(ctx, "gone.k", []byte("v2"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if r2 <= r1 {
		t.Fatalf("revision %d after Delete, %d before: want increasing", r2, r1)
	}
	if _, err := s.Update(ctx, "gone.k", []byte("late"), r1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Update with a revision from before the Delete: err = %v, want ErrConflict", err)
	}
}

// listsAreBoundedAndOrdered: Append keeps the newest items, Tail returns
// them oldest first, and lists are independent.
func (su suite) listsAreBoundedAndOrdered(t *testing.T) {
	ctx := su.ctx
	s := su.fresh(t)
	if got, err := s.Tail(ctx, "hist.none", 5); err != nil || len(got) != 0 {
		t.Fatalf("Tail of a missing list = %q, %v", got, err)
	}
	for i := range 10 {
		if err := s.Append(ctx, "hist.a", []byte(fmt.Sprint(i)), 4); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.Tail(ctx, "hist.a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%s", all) != "[6 7 8 9]" {
		t.Fatalf("list = %s, want [6 7 8 9] (kept newest 4)", all)
	}
	two, _ := s.Tail(ctx, "hist.a", 2)
	if fmt.Sprintf("%s", two) != "[8 9]" {
		t.Fatalf("Tail 2 = %s, want [8 9]", two)
	}
	if more, _ := s.Tail(ctx, "hist.a", 10); fmt.Sprintf("%s", more) != "[6 7 8 9]" {
		t.Fatalf("Tail 10 of 4 items = %s, want [6 7 8 9]", more)
	}
	for i := range 10 {
		if err := s.Append(ctx, "hist.all", []byte(fmt.Sprint(i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if all, _ := s.Tail(ctx, "hist.all", 0); fmt.Sprintf("%s", all) != "[0 1 2 3 4 5 6 7 8 9]" {
		t.Fatalf("list appended with keep 0 = %s, want all 10 items", all)
	}
	if other, _ := s.Tail(ctx, "hist.a", 0); len(other) != 4 {
		t.Fatalf("appending to one list changed another: %s", other)
	}
}

// cancelledContextFails: every call with a cancelled context fails and
// writes nothing.
func (su suite) cancelledContextFails(t *testing.T) {
	ctx := su.ctx
	s := su.fresh(t)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Put(cctx, "ctx.k", []byte("v")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with a cancelled context: err = %v", err)
	}
	if err := s.Append(cctx, "ctx.l", []byte("v"), 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append with a cancelled context: err = %v", err)
	}
	calls := map[string]func() error{
		"Get":    func() error { _, err := s.Get(cctx, "ctx.k"); return err },
		"Create": func() error { _, err := s.Create(cctx, "ctx.k", []byte("v"), 0); return err },
		"Update": func() error { _, err := s.Update(cctx, "ctx.k", []byte("v"), 1); return err },
		"Delete": func() error { return s.Delete(cctx, "ctx.k") },
		"Tail":   func() error { _, err := s.Tail(cctx, "ctx.l", 1); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: err = %v", name, err)
		}
	}
	// Nothing was written.
	if _, err := s.Get(ctx, "ctx.k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after cancelled writes: err = %v, want ErrNotFound", err)
	}
	if l, err := s.Tail(ctx, "ctx.l", 0); err != nil || len(l) != 0 {
		t.Fatalf("list after a cancelled Append = %q, %v; want empty", l, err)
	}
}

// closedStoreRefuses: every call after Close fails with ErrClosed.
func (su suite) closedStoreRefuses(t *testing.T) {
	ctx := su.ctx
	s := su.fresh(t)
	if _, err := s.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	calls := EveryCall(ctx, s, "k")
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: err = %v, want ErrClosed", name, err)
		}
	}
}

// valuesAreCopied: neither the caller's slices nor the returned ones alias
// what is stored.
func (su suite) valuesAreCopied(t *testing.T) {
	ctx := su.ctx
	s := su.fresh(t)
	v := []byte("abc")
	_, _ = s.Put(ctx, "copy.k", v)
	v[0] = 'X'
	e, _ := s.Get(ctx, "copy.k")
	if string(e.Value) != "abc" {
		t.Fatalf("stored value changed with caller's slice: %q", e.Value)
	}
	e.Value[0] = 'Y'
	if again, _ := s.Get(ctx, "copy.k"); string(again.Value) != "abc" {
		t.Fatalf("stored value changed with a returned slice: %q", again.Value)
	}
	item := []byte("xyz")
	_ = s.Append(ctx, "copy.l", item, 0)
	item[0] = 'X'
	got, _ := s.Tail(ctx, "copy.l", 0)
	if len(got) != 1 || string(got[0]) != "xyz" {
		t.Fatalf("stored list item changed with caller's slice: %q", got)
	}
	got[0][0] = 'Y'
	if again, _ := s.Tail(ctx, "copy.l", 0); string(again[0]) != "xyz" {
		t.Fatalf("stored list item changed with a returned slice: %q", again)
	}
}
