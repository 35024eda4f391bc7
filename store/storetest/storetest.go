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
	ctx := context.Background()
	fresh := func(t *testing.T) store.Store {
		s := b.New(t)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}

	t.Run("GetPutDelete", func(t *testing.T) {
		s := fresh(t)
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
	})

	t.Run("CreateIsSetIfAbsent", func(t *testing.T) {
		s := fresh(t)
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
	})

	t.Run("CreateRaceHasOneWinner", func(t *testing.T) {
		s := fresh(t)
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
	})

	t.Run("CreateTTLExpires", func(t *testing.T) {
		s := fresh(t)
		if _, err := s.Create(ctx, "lease.y", []byte("v"), ttl); err != nil {
			t.Fatal(err)
		}
		b.Elapse(t, ttl)
		if _, err := s.Get(ctx, "lease.y"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get after expiry: err = %v, want ErrNotFound", err)
		}
		if _, err := s.Create(ctx, "lease.y", []byte("w"), ttl); err != nil {
			t.Fatalf("Create after expiry: %v", err)
		}
	})

	t.Run("UpdateDropsTTL", func(t *testing.T) {
		s := fresh(t)
		r1, err := s.Create(ctx, "lease.u", []byte("v1"), ttl)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx, "lease.u", []byte("v2"), r1); err != nil {
			t.Fatal(err)
		}
		b.Elapse(t, ttl)
		e, err := s.Get(ctx, "lease.u")
		if err != nil || string(e.Value) != "v2" {
			t.Fatalf("Get after the Create ttl passed = %q, %v; want v2 (Update drops the ttl)", e.Value, err)
		}
	})

	t.Run("UpdateComparesRevision", func(t *testing.T) {
		s := fresh(t)
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
	})

	t.Run("ListsAreBoundedAndOrdered", func(t *testing.T) {
		s := fresh(t)
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
	})

	t.Run("CancelledContextFails", func(t *testing.T) {
		s := fresh(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.Put(cctx, "ctx.k", []byte("v")); !errors.Is(err, context.Canceled) {
			t.Fatalf("Put with a cancelled context: err = %v", err)
		}
		if err := s.Append(cctx, "ctx.l", []byte("v"), 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("Append with a cancelled context: err = %v", err)
		}
	})

	t.Run("ValuesAreCopied", func(t *testing.T) {
		s := fresh(t)
		v := []byte("abc")
		_, _ = s.Put(ctx, "copy.k", v)
		v[0] = 'X'
		e, _ := s.Get(ctx, "copy.k")
		if string(e.Value) != "abc" {
			t.Fatalf("stored value changed with caller's slice: %q", e.Value)
		}
	})
}
