package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/agent-worker/agent-worker/store"
)

// lease writes (or moves) the fence key and returns its fence, claimed.
func (su suite) lease(t *testing.T, s store.Store, key, holder string) store.Fence {
	t.Helper()
	rev, err := s.Put(su.ctx, key, []byte(holder))
	if err != nil {
		t.Fatal(err)
	}
	f := store.Fence{Key: key, Revision: rev}
	if err := s.Claim(su.ctx, f); err != nil {
		t.Fatalf("Claim %s: %v", f, err)
	}
	return f
}

// fencedWritesLand: while the fence holds, writes under it land like
// plain ones, and the fence key itself is left as it was.
func (su suite) fencedWritesLand(t *testing.T) {
	ctx := su.ctx
	s := su.fresh(t)
	f := su.lease(t, s, "lease.a", "r1")
	w := s.Fenced(f)
	if _, err := w.Put(ctx, "agent.a.paused", []byte("yes")); err != nil {
		t.Fatalf("fenced Put: %v", err)
	}
	if e, err := s.Get(ctx, "agent.a.paused"); err != nil || string(e.Value) != "yes" {
		t.Fatalf("after a fenced Put: %q, %v", e.Value, err)
	}
	for i := range 3 {
		if err := w.Append(ctx, "history.a", []byte(fmt.Sprint(i)), 2); err != nil {
			t.Fatalf("fenced Append: %v", err)
		}
	}
	if l, err := s.Tail(ctx, "history.a", 0); err != nil || fmt.Sprintf("%s", l) != "[1 2]" {
		t.Fatalf("list after fenced Appends with keep 2 = %s, %v; want [1 2]", l, err)
	}
	if err := w.Delete(ctx, "agent.a.paused"); err != nil {
		t.Fatalf("fenced Delete: %v", err)
	}
	if _, err := s.Get(ctx, "agent.a.paused"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after a fenced Delete: err = %v, want ErrNotFound", err)
	}
	if err := w.Delete(ctx, "agent.a.never"); err != nil {
		t.Fatalf("fenced Delete of a missing key: %v", err)
	}
	if e, err := s.Get(ctx, "lease.a"); err != nil || e.Revision != f.Revision {
		t.Fatalf("fence key after fenced writes: rev %d, %v; want %d (untouched)", e.Revision, err, f.Revision)
	}
	if store.Under(s, store.Fence{}) != store.Writer(s) {
		t.Fatal("Under the zero fence is not the store's plain writes")
	}
}

// fencedWritesRefused: once the fence key moved (another holder took the
// lease and claimed it), every write under the old fence fails with
// ErrFenced and leaves the state as the new holder has it; so does one
// under a fence whose key is gone, or was never written.
func (su suite) fencedWritesRefused(t *testing.T) {
	ctx := su.ctx
	s := su.fresh(t)
	old := su.lease(t, s, "lease.a", "r1")
	if _, err := s.Put(ctx, "agent.a.paused", []byte("r1's")); err != nil {
		t.Fatal(err)
	}
	if err := s.Fenced(old).Append(ctx, "history.a", []byte("t1"), 0); err != nil {
		t.Fatal(err)
	}
	su.lease(t, s, "lease.a", "r2")
	w := s.Fenced(old)
	if _, err := w.Put(ctx, "agent.a.paused", []byte("stale")); !errors.Is(err, store.ErrFenced) {
		t.Errorf("Put under a moved fence: err = %v, want ErrFenced", err)
	}
	if err := w.Delete(ctx, "agent.a.paused"); !errors.Is(err, store.ErrFenced) {
		t.Errorf("Delete under a moved fence: err = %v, want ErrFenced", err)
	}
	if err := w.Append(ctx, "history.a", []byte("stale"), 0); !errors.Is(err, store.ErrFenced) {
		t.Errorf("Append under a moved fence: err = %v, want ErrFenced", err)
	}
	if e, err := s.Get(ctx, "agent.a.paused"); err != nil || string(e.Value) != "r1's" {
		t.Errorf("key after refused fenced writes = %q, %v; want r1's", e.Value, err)
	}
	if l, _ := s.Tail(ctx, "history.a", 0); fmt.Sprintf("%s", l) != "[t1]" {
		t.Errorf("list after a refused fenced Append = %s, want [t1]", l)
	}
	if err := s.Delete(ctx, "lease.a"); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]store.Fence{"deleted": old, "never written": {Key: "lease.none", Revision: 1}} {
		if _, err := s.Fenced(f).Put(ctx, "agent.a.model", []byte("x")); !errors.Is(err, store.ErrFenced) {
			t.Errorf("Put under a fence whose key is %s: err = %v, want ErrFenced", name, err)
		}
		if err := s.Fenced(f).Append(ctx, "history.a", []byte("x"), 0); !errors.Is(err, store.ErrFenced) {
			t.Errorf("Append under a fence whose key is %s: err = %v, want ErrFenced", name, err)
		}
	}
	if _, err := s.Get(ctx, "agent.a.model"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused fenced Put wrote: err = %v, want ErrNotFound", err)
	}
}

// claimRefusesMoved: a fence older than one claimed cannot be claimed,
// and claiming the newest fence again is harmless.
func (su suite) claimRefusesMoved(t *testing.T) {
	ctx := su.ctx
	s := su.fresh(t)
	old := su.lease(t, s, "lease.b", "r1")
	cur := su.lease(t, s, "lease.b", "r2")
	if err := s.Claim(ctx, old); !errors.Is(err, store.ErrFenced) {
		t.Errorf("Claim of a moved fence: err = %v, want ErrFenced", err)
	}
	if err := s.Claim(ctx, cur); err != nil {
		t.Errorf("Claim of the newest fence again: %v", err)
	}
	if err := s.Fenced(cur).Append(ctx, "history.b", []byte("ok"), 0); err != nil {
		t.Errorf("Append under the newest fence after claims: %v", err)
	}
}

// fencedAppendsRacingAMove: appends under a fence while the lease moves
// and is claimed: exactly the appends that returned nil are in the list,
// and every append made after the claim returned fails.
func (su suite) fencedAppendsRacingAMove(t *testing.T) {
	ctx := su.ctx
	s := su.fresh(t)
	old := su.lease(t, s, "lease.c", "r1")
	var landed []string          // the appender's, read after wg.Wait
	var after []error            // results of appends begun after the claim
	going := make(chan struct{}) // three appends landed
	claimed := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; i < 40; i++ { // within every backend's list bound
			select {
			case <-claimed:
				i = 40
				continue
			default:
			}
			item := fmt.Sprint(i)
			err := s.Fenced(old).Append(ctx, "history.c", []byte(item), 0)
			switch {
			case err == nil:
				landed = append(landed, item)
				if len(landed) == 3 {
					close(going)
				}
			case !errors.Is(err, store.ErrFenced):
				t.Errorf("append %s: %v", item, err)
			}
		}
		<-claimed
		for j := range 3 {
			after = append(after, s.Fenced(old).Append(ctx, "history.c", []byte(fmt.Sprintf("late%d", j)), 0))
		}
	})
	<-going
	su.lease(t, s, "lease.c", "r2")
	close(claimed)
	wg.Wait()
	for _, err := range after {
		if !errors.Is(err, store.ErrFenced) {
			t.Errorf("append under the old fence after the claim: err = %v, want ErrFenced", err)
		}
	}
	raw, err := s.Tail(ctx, "history.c", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range raw {
		got = append(got, string(b))
	}
	if !slices.Equal(got, landed) {
		t.Fatalf("list holds %v; the appends that returned nil were %v", got, landed)
	}
}
