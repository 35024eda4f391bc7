package natsbus

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/config"
)

func embedded(t *testing.T) *Conn {
	t.Helper()
	c, err := Connect(config.NATS{Listen: "-1"}, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestEnsureStreamCreatesUpdatesAndRefusesForeignStreams(t *testing.T) {
	t.Parallel()
	c := embedded(t)
	ctx := context.Background()
	spec := StreamSpec{Name: "AGENTS", Subjects: []string{"agents.*.inbox", "agents.*.deferred"}, DuplicateWindow: 2 * time.Minute}
	if _, err := EnsureStream(ctx, c.JS, spec, c.log); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureStream(ctx, c.JS, spec, c.log); err != nil {
		t.Fatalf("second EnsureStream (idempotent): %v", err)
	}
	spec.Subjects = append(spec.Subjects, "alerts.prod.>")
	s, err := EnsureStream(ctx, c.JS, spec, c.log)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Subjects; !slices.Contains(got, "alerts.prod.>") {
		t.Fatalf("bound subject not added: %v", got)
	}

	if _, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}}); err != nil {
		t.Fatal(err)
	}
	_, err = EnsureStream(ctx, c.JS, StreamSpec{Name: "OTHER", Subjects: []string{"agents2.*.inbox"}}, c.log)
	if !errors.Is(err, ErrStreamConflict) || !strings.Contains(err.Error(), "not created by agent-worker") {
		t.Fatalf("foreign stream: err = %v", err)
	}
	info, _ := c.JS.Stream(ctx, "OTHER")
	if got := info.CachedInfo().Config.Subjects; len(got) != 1 || got[0] != "other.>" {
		t.Fatalf("a foreign stream was changed: %v", got)
	}
}

func TestEmbeddedServerRefusesABusyPort(t *testing.T) {
	t.Parallel()
	c := embedded(t)
	port := c.server.Addr().String()
	_, err := Connect(config.NATS{Listen: port}, t.TempDir(), nil)
	if err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("second server on %s: err = %v", port, err)
	}
}

// An address this host does not have is not a busy port: the error says
// what the OS said.
func TestEmbeddedServerSaysWhyItCannotListen(t *testing.T) {
	t.Parallel()
	const addr = "192.0.2.1:4222" // TEST-NET-1: no host has it
	_, err := Connect(config.NATS{Listen: addr}, t.TempDir(), nil)
	if err == nil || !strings.Contains(err.Error(), "cannot assign requested address") || strings.Contains(err.Error(), "in use") {
		t.Fatalf("server on %s: err = %v", addr, err)
	}
}

func TestEnsureStreamWorkQueue(t *testing.T) {
	t.Parallel()
	c := embedded(t)
	ctx := context.Background()
	spec := StreamSpec{Name: "AGENTS_SUBAGENTS", Subjects: []string{"agents._subagents.jobs", "agents._subagents.charges.*"}, WorkQueue: true}
	s, err := EnsureStream(ctx, c.JS, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Retention; got != jetstream.WorkQueuePolicy {
		t.Fatalf("retention %v", got)
	}
	if _, err := EnsureStream(ctx, c.JS, spec, nil); err != nil {
		t.Fatalf("second EnsureStream (idempotent): %v", err)
	}
	// The input stream's retention is not changed in place.
	_, err = EnsureStream(ctx, c.JS, StreamSpec{Name: "AGENTS_SUBAGENTS", Subjects: spec.Subjects}, nil)
	if !errors.Is(err, ErrStreamConflict) || !strings.Contains(err.Error(), "retention") {
		t.Fatalf("retention change: %v", err)
	}
	sub := Subjects{Prefix: "agents"}
	if p, ok := sub.SubagentParent(sub.SubagentAdmit("oncall")); !ok || p != "oncall" {
		t.Fatalf("SubagentParent = %q %v", p, ok)
	}
}

// More than one replica on a server that is not clustered (the embedded
// one) fails and says what is needed; nothing is created.
func TestEnsureStreamReplicasNeedACluster(t *testing.T) {
	t.Parallel()
	c := embedded(t)
	ctx := context.Background()
	_, err := EnsureStream(ctx, c.JS, StreamSpec{Name: "AGENTS", Subjects: []string{"agents.*.inbox"}, Replicas: 3}, nil)
	if err == nil || !strings.Contains(err.Error(), "nats.replicas is 3, but the NATS server is not part of a JetStream cluster") {
		t.Fatalf("create with 3 replicas: err = %v", err)
	}
	if _, err := c.JS.Stream(ctx, "AGENTS"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream after the failed create: %v", err)
	}
	// An existing R1 stream is not changed either.
	spec := StreamSpec{Name: "AGENTS", Subjects: []string{"agents.*.inbox"}, Replicas: 1}
	if _, err := EnsureStream(ctx, c.JS, spec, nil); err != nil {
		t.Fatal(err)
	}
	spec.Replicas = 3
	if _, err := EnsureStream(ctx, c.JS, spec, nil); err == nil || !strings.Contains(err.Error(), "not part of a JetStream cluster") {
		t.Fatalf("update to 3 replicas: err = %v", err)
	}
	s, err := c.JS.Stream(ctx, "AGENTS")
	if err != nil || s.CachedInfo().Config.Replicas != 1 {
		t.Fatalf("stream after the failed update: %v", err)
	}
	if _, err := EnsureStream(ctx, c.JS, StreamSpec{Name: "AGENTS", Replicas: -1}, nil); err == nil {
		t.Fatal("negative replicas accepted")
	}
}
