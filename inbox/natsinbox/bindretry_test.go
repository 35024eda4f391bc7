package natsinbox_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/store/memory"
)

// A Bind that fails (the stream's consumer limit is full) is reported by
// NotConsuming and BindError, told to OnBindFailure, and retried with
// backoff on the binding's clock until it binds; Unbind stops the retries.
func TestAFailedBindIsReportedAndRetriedUntilItBinds(t *testing.T) {
	t.Parallel()
	conn, err := natsbus.Connect(config.NATS{Listen: "-1"}, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	ctx := context.Background()
	subjects := natsbus.Subjects{Prefix: "agents"}
	spec := natsbus.StreamSpec{Name: "AGENTS", Subjects: []string{subjects.AllInboxes(), subjects.AllDeferred()}, MaxConsumers: 2}
	if _, err := natsbus.EnsureStream(ctx, conn.JS, spec, nil); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var failures atomic.Int32
	tgt := newTarget()
	b, err := natsinbox.Start(ctx, conn.NC, conn.JS, []natsinbox.Agent{{Name: "a", Target: tgt, Cap: 10}},
		natsinbox.Options{Subjects: subjects, Stream: "AGENTS", MaxBytes: 4096, AckWait: time.Hour, Store: memory.New(nil), Clock: clk, Leased: true,
			BindRetry: time.Second, BindRetryMax: 4 * time.Second, OnBindFailure: func(string, error) { failures.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)

	// unknown-agents and agent-a fill the limit of 2: deferred-a fails.
	if err := b.Bind(ctx, "a"); err == nil || !strings.Contains(err.Error(), "maximum consumers limit") {
		t.Fatalf("Bind under a full limit: %v", err)
	}
	nc := b.NotConsuming()
	if len(nc) != 1 || nc[0].Agent != "a" || nc[0].Attempts != 1 || !strings.Contains(b.BindError("a"), "maximum consumers limit") || failures.Load() != 1 {
		t.Fatalf("after a failed Bind: NotConsuming %+v, BindError %q, failures %d", nc, b.BindError("a"), failures.Load())
	}
	clk.Advance(5 * time.Second) // past the first retry (1s, up to 20% jitter): it fails again
	if nc := b.NotConsuming(); len(nc) != 1 || nc[0].Attempts < 2 || failures.Load() < 2 {
		t.Fatalf("after the retry: NotConsuming %+v, failures %d", nc, failures.Load())
	}

	// Unbind gives the agent up: no more retries.
	b.Unbind("a")
	n := failures.Load()
	clk.Advance(time.Minute)
	if len(b.NotConsuming()) != 0 || b.BindError("a") != "" || failures.Load() != n {
		t.Fatalf("after Unbind: NotConsuming %+v, failures %d (was %d)", b.NotConsuming(), failures.Load(), n)
	}

	// Bound again under the full limit, then the limit is raised: the next
	// retry binds it, and its message arrives.
	if err := b.Bind(ctx, "a"); err == nil {
		t.Fatal("Bind under a full limit succeeded")
	}
	spec.MaxConsumers = 10
	if _, err := natsbus.EnsureStream(ctx, conn.JS, spec, nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(5 * time.Second)
	if nc := b.NotConsuming(); len(nc) != 0 {
		t.Fatalf("after the limit was raised and a retry: NotConsuming %+v", nc)
	}
	if _, err := conn.JS.Publish(ctx, "agents.a.deferred", []byte(`{"text": "later", "id": "d1"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-tgt.sent:
		if m.ID != "d1" {
			t.Fatalf("got %q, want d1", m.ID)
		}
		m.Receipt.Handled()
	case <-time.After(deadline):
		t.Fatal("the deferred message never arrived after the retry bound the agent")
	}
}
