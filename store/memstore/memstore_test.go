package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
	"github.com/agent-worker/agent-worker/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	var c *clock.Fake
	storetest.Run(t, storetest.Backend{
		New: func(t *testing.T) store.Store {
			c = clock.NewFake(time.Unix(1_700_000_000, 0))
			return memstore.New(c)
		},
		Elapse: func(t *testing.T, d time.Duration) { c.Advance(d) },
	})
}

func TestClosed(t *testing.T) {
	t.Parallel()
	s := memstore.New(nil)
	_ = s.Close()
	if _, err := s.Get(context.Background(), "k"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
}

func TestGetJSON(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New(nil)
	var v struct{ N int }
	if found, err := store.GetJSON(ctx, s, "k", &v); found || err != nil {
		t.Fatalf("missing key: %v %v", found, err)
	}
	_, _ = s.Put(ctx, "k", []byte(`{"N": 7}`))
	if found, err := store.GetJSON(ctx, s, "k", &v); !found || err != nil || v.N != 7 {
		t.Fatalf("GetJSON = %v %v %+v", found, err, v)
	}
	_, _ = s.Put(ctx, "k", []byte(`not json`))
	if _, err := store.GetJSON(ctx, s, "k", &v); !errors.Is(err, store.ErrUnreadable) {
		t.Fatalf("bad JSON: %v", err)
	}
}
