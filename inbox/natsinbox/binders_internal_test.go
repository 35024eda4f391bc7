package natsinbox

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// heldGet is a store whose next Get, once armed, reads the key and then
// waits for release before it returns what it read.
type heldGet struct {
	store.Store
	mu      sync.Mutex
	armed   bool
	read    chan struct{}
	release chan struct{}
}

func (s *heldGet) Get(ctx context.Context, key string) (store.Entry, error) {
	s.mu.Lock()
	hold := s.armed
	s.armed = false
	s.mu.Unlock()
	e, err := s.Store.Get(ctx, key)
	if hold {
		close(s.read)
		<-s.release
	}
	return e, err
}

// A purger's read of the binders record that raced a reload's write must
// not replace the write in the copy since answers from: the agent the
// reload adds would start at 0 and read the backlog other binders left in
// the log (TestReloadSubscribe saw it once in CI: a4 handled 40 alerts
// published before it existed).
func TestABindersReadOlderThanAWriteLeavesTheWriteInForce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &heldGet{Store: memstore.New(nil), read: make(chan struct{}), release: make(chan struct{})}
	b := newBinders(st, "r1", nil, slog.New(slog.DiscardHandler), time.Now)
	if err := b.started(ctx, Bindings{"alerts.>": {"held"}}, []string{"held"}, 0); err != nil {
		t.Fatal(err)
	}

	st.mu.Lock()
	st.armed = true
	st.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, err := b.others(ctx, func(string, string) bool { return true })
		done <- err
	}()
	<-st.read // others holds the record as it was before the reload

	old := Bindings{"alerts.>": {"held"}}
	next := Bindings{"alerts.>": {"a4", "held"}}
	fresh, err := b.placed(ctx, old, next, []string{"a4", "held"}, 40)
	if err != nil {
		t.Fatal(err)
	}
	if !fresh.has("alerts.>", "a4") {
		t.Fatalf("placed started %v, want a4 on alerts.>", fresh)
	}
	close(st.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := b.since("alerts.>", "a4"); got != 40 {
		t.Fatalf("a4 starts alerts.> after %d, want 40 (the stream's last sequence at the reload)", got)
	}
}
