package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// down fails every read.
type down struct{ store.Store }

func (down) Get(context.Context, string) (store.Entry, error) {
	return store.Entry{}, errors.New("connection refused")
}

// Every operation is observed once, after it returned, with its outcome:
// a refusal (not found, exists, conflict) is a normal answer, not an
// error.
func TestObservedCountsEveryOperation(t *testing.T) {
	t.Parallel()
	var seen []string
	st := store.Observed(memstore.New(nil), func(op string, err error) {
		seen = append(seen, op+":"+store.Outcome(err))
	})
	ctx := t.Context()
	_, _ = st.Get(ctx, "k")
	rev, _ := st.Create(ctx, "k", []byte("v"), 0)
	_, _ = st.Create(ctx, "k", []byte("v"), 0)
	_, _ = st.Update(ctx, "k", []byte("w"), rev+7)
	_, _ = st.Update(ctx, "k", []byte("w"), rev)
	_, _ = st.Put(ctx, "k", []byte("x"))
	_ = st.Delete(ctx, "k")
	_ = st.Append(ctx, "l", []byte("a"), 3)
	_, _ = st.Tail(ctx, "l", 0)
	_, _ = store.Observed(down{st}, func(op string, err error) { seen = append(seen, op+":"+store.Outcome(err)) }).Get(ctx, "k")
	want := []string{"get:refused", "create:ok", "create:refused", "update:refused", "update:ok", "put:ok", "delete:ok", "append:ok", "tail:ok", "get:error"}
	if !slices.Equal(seen, want) {
		t.Fatalf("observed\n  %v\nwant\n  %v", seen, want)
	}
}
