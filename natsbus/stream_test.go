package natsbus

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
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

// The embedded server, like any nats-server, allows 1,000 consumers on a
// stream that has no limit of its own (JetStream limits
// default_max_consumers, server.JSDefaultMaxConsumersPerStream); the
// 1,001st is refused. The stream's MaxConsumers lifts it, in place.
func TestStreamConsumerLimitIsTheServerDefaultUntilTheStreamSetsOne(t *testing.T) {
	t.Parallel()
	c := embedded(t)
	ctx := context.Background()
	spec := StreamSpec{Name: "AGENTS", Subjects: []string{"agents.*.inbox"}}
	s, err := EnsureStream(ctx, c.JS, spec, c.log)
	if err != nil {
		t.Fatal(err)
	}
	create := func(i int) error {
		_, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "c" + strconv.Itoa(i), AckPolicy: jetstream.AckExplicitPolicy,
			FilterSubject: "agents.a" + strconv.Itoa(i) + ".inbox"})
		return err
	}
	for i := range config.DefaultServerMaxConsumers {
		if err := create(i); err != nil {
			t.Fatalf("consumer %d: %v", i+1, err)
		}
	}
	err = create(config.DefaultServerMaxConsumers)
	if apiErr, ok := errors.AsType[*jetstream.APIError](err); !ok || apiErr.ErrorCode != jetstream.JSErrCodeMaximumConsumersLimit {
		t.Fatalf("consumer %d without a stream limit: err = %v, want the maximum consumers limit", config.DefaultServerMaxConsumers+1, err)
	}

	spec.MaxConsumers = 1100
	if s, err = EnsureStream(ctx, c.JS, spec, c.log); err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.MaxConsumers; got != 1100 {
		t.Fatalf("stream max_consumers = %d, want 1100", got)
	}
	for i := config.DefaultServerMaxConsumers; i < 1100; i++ {
		if err := create(i); err != nil {
			t.Fatalf("consumer %d under a stream limit of 1100: %v", i+1, err)
		}
	}
	if err := create(1100); err == nil {
		t.Fatal("consumer 1101 under a stream limit of 1100 was created")
	}
	// Zero leaves the stream's limit as it is.
	spec.MaxConsumers = 0
	if s, err = EnsureStream(ctx, c.JS, spec, c.log); err != nil || s.CachedInfo().Config.MaxConsumers != 1100 {
		t.Fatalf("EnsureStream without a limit: err %v, max_consumers %d, want 1100 kept", err, s.CachedInfo().Config.MaxConsumers)
	}
}

func TestConsumerLimitAgainstTheAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The embedded server's account has no limit: the value stands.
	c := embedded(t)
	if got, err := ConsumerLimit(ctx, c.JS, 5000, 2401, true, nil); err != nil || got != 5000 {
		t.Fatalf("unlimited account: %d, %v", got, err)
	}

	// An account limited to 100 consumers per stream.
	conf := filepath.Join(t.TempDir(), "server.conf")
	if err := os.WriteFile(conf, []byte(`listen: "127.0.0.1:-1"
jetstream: {store_dir: "`+t.TempDir()+`"}
accounts: {A: {jetstream: {max_consumers: 100}, users: [{user: a, password: a}]}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	opts.NoLog, opts.NoSigs = true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo("a", "a"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	if got, err := ConsumerLimit(ctx, js, 1000, 41, true, nil); err != nil || got != 100 {
		t.Fatalf("automatic value above the account's limit: %d, %v; want lowered to 100", got, err)
	}
	if _, err := ConsumerLimit(ctx, js, 1000, 41, false, nil); !errors.Is(err, ErrConsumerLimit) || !strings.Contains(err.Error(), "nats.max_consumers is 1000") || !strings.Contains(err.Error(), "at most 100") {
		t.Fatalf("configured value above the account's limit: %v", err)
	}
	_, err = ConsumerLimit(ctx, js, 1000, 201, true, nil)
	if !errors.Is(err, ErrConsumerLimit) || !strings.Contains(err.Error(), "allows 100 consumers per stream") || !strings.Contains(err.Error(), "need 201") {
		t.Fatalf("account too small for the agents: %v", err)
	}
}
