package control

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/access"
	"github.com/agent-worker/agent-worker/seal"
)

// TestForwardsForgetWhatCanNoLongerBeReplayed: a seal is remembered while
// a replay of it could still pass the window, and forgotten after, so the
// memory stays bounded by the forwards of the last two windows.
func TestForwardsForgetWhatCanNoLongerBeReplayed(t *testing.T) {
	t.Parallel()
	key := seal.NewKey([]byte("forward window test key, 32 byte"))
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	forward := func(at time.Time) *nats.Msg {
		m := &nats.Msg{Subject: "agents.alpha.control", Data: []byte(`{"verb":"pause"}`)}
		sealForward(key, m, access.Caller{Name: "ops", Role: access.RoleOperate}, at)
		return m
	}
	var f forwards
	first := forward(t0)
	if ok, err := f.sealed(key, first, t0); !ok || err != nil {
		t.Fatalf("fresh forward: %v, %v", ok, err)
	}
	if ok, err := f.sealed(key, first, t0.Add(ForwardWindow)); !ok || !errors.Is(err, errReplayed) {
		t.Fatalf("replay within the window: %v, %v", ok, err)
	}
	if ok, err := f.sealed(key, forward(t0), t0); !ok || err != nil {
		t.Fatalf("an identical request sealed at the same instant (another nonce): %v, %v", ok, err)
	}
	later := t0.Add(2*ForwardWindow + time.Second)
	if ok, err := f.sealed(key, first, later); !ok || !errors.Is(err, errStaleSeal) {
		t.Fatalf("replay after the window: %v, %v", ok, err)
	}
	if ok, err := f.sealed(key, forward(later), later); !ok || err != nil {
		t.Fatalf("fresh forward later: %v, %v", ok, err)
	}
	if len(f.order) != 1 || len(f.seen) != 1 {
		t.Fatalf("remembered %d seals (%d in order), want only the latest", len(f.seen), len(f.order))
	}
	if ok, _ := f.sealed(seal.NewKey([]byte("another key")), forward(later), later); ok {
		t.Fatal("a seal of another key checked")
	}
}
