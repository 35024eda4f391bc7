package natsinbox_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memory"
)

// gatedStore holds every read of a handled id until open is closed: a
// store that is down and times out slowly (Redis unreachable).
type gatedStore struct {
	store.Store
	reading chan struct{} // told when a read starts
	open    chan struct{}
	done    *atomic.Int32 // reads of handled ids finished
}

func (s gatedStore) Get(ctx context.Context, key string) (store.Entry, error) {
	if strings.HasPrefix(key, "handled.") {
		select {
		case s.reading <- struct{}{}:
		default:
		}
		<-s.open
		defer s.done.Add(1)
	}
	return s.Store.Get(ctx, key)
}

// A delivery whose handled-id check outlasts Unbind (the store is down
// while the lease is lost) is released, not handed to the agent: the
// agent is no longer consumed here, and its receipt would never be
// settled. When the agent is bound again every message arrives once. On
// the old code the late delivery was sent to the agent after Unbind and
// its stale record swallowed the redelivery: the message was stuck.
func TestADeliveryOutlastingUnbindIsReleased(t *testing.T) {
	t.Parallel()
	st := gatedStore{Store: memory.New(nil), reading: make(chan struct{}, 1), open: make(chan struct{}), done: &atomic.Int32{}}
	r := newRig(t, st, 30*time.Second)
	// One message: deliveries queued behind it in the client may or may
	// not reach a callback before Unbind gives up on the drain.
	ids := []string{"m1"}
	for _, id := range ids {
		r.publish(t, "agents.a.inbox", id, `{"text": "disk full", "id": "`+id+`"}`)
	}
	select {
	case <-st.reading:
	case <-time.After(deadline):
		t.Fatal("no handled-id check started")
	}
	r.b.Unbind("a") // waits for the consumer to drain, and gives up
	close(st.open)
	// The held deliveries finish their check now; none may reach the agent.
	end := time.Now().Add(deadline)
	for st.done.Load() < int32(len(ids)) {
		if time.Now().After(end) {
			t.Fatalf("only %d of the deliveries finished their check", st.done.Load())
		}
		<-time.After(10 * time.Millisecond)
	}
	if err := r.b.Bind(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for len(got) < len(ids) {
		select {
		case m := <-r.tgt.sent:
			got[m.ID]++
			m.Receipt.Handled()
		case <-time.After(deadline):
			t.Fatalf("after binding again only %v arrived", got)
		}
	}
	end = time.Now().Add(deadline)
	for r.ackPending(t, "agent-a") != 0 {
		if time.Now().After(end) {
			t.Fatalf("%d messages never acked", r.ackPending(t, "agent-a"))
		}
		<-time.After(10 * time.Millisecond)
	}
	r.tgt.mu.Lock()
	defer r.tgt.mu.Unlock()
	sends := map[string]int{}
	for _, m := range r.tgt.got {
		sends[m.ID]++
		if !m.Redelivered {
			// Every message was delivered once before Unbind: a first
			// delivery reaching the agent is one that outlasted Unbind.
			t.Errorf("%s reached the agent from before Unbind", m.ID)
		}
	}
	for _, id := range ids {
		if sends[id] != 1 {
			t.Errorf("%s sent to the agent %d times (%v)", id, sends[id], sends)
		}
	}
}
