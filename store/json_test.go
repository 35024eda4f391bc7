package store_test

import (
	"sync"
	"testing"

	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// Concurrent UpdateJSONs of one key each land once: a writer that lost
// the compare-and-set reads again and applies its change to the new value.
func TestUpdateJSONLosesNoConcurrentChange(t *testing.T) {
	t.Parallel()
	st := memstore.New(nil)
	type counter struct{ N int }
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if err := store.UpdateJSON(t.Context(), st, "c", func(c *counter) (bool, error) { c.N++; return true, nil }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var c counter
	if ok, err := store.GetJSON(t.Context(), st, "c", &c); !ok || err != nil || c.N != 16 {
		t.Fatalf("counter %d (%v, %v), want 16", c.N, ok, err)
	}
	if err := store.UpdateJSON(t.Context(), st, "c", func(c *counter) (bool, error) { c.N = 99; return false, nil }); err != nil {
		t.Fatal(err)
	}
	if _, _ = store.GetJSON(t.Context(), st, "c", &c); c.N != 16 {
		t.Fatalf("a change fn said not to write was written: %d", c.N)
	}
}
