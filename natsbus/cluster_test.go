package natsbus_test

// Tests against a real three-server JetStream cluster, in process: streams
// and KV buckets with nats.replicas copies, and what that buys (a stream
// that outlives the server leading it).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/store/natskv"
	"github.com/agent-worker/agent-worker/worker"
)

// globalAccount is the account of a server without accounts configured.
const globalAccount = "$G"

// clusterWait bounds every wait on the cluster; waits end as soon as their
// condition holds.
const clusterWait = 20 * time.Second

// cluster is three nats-servers with JetStream, routed to each other on
// 127.0.0.1.
type cluster struct {
	servers []*server.Server
}

// freePorts returns n ports free on 127.0.0.1 a moment ago: every server's
// route list must name all the routes before any starts.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// tryCluster starts the three servers with stores under dir and waits
// until each accepts connections.
func tryCluster(t *testing.T, dir string) (*cluster, error) {
	t.Helper()
	ports := freePorts(t, 3)
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	c := &cluster{}
	for i, p := range ports {
		ns, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("S%d", i+1),
			Host:       "127.0.0.1",
			Port:       -1,
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("s%d", i+1)),
			Cluster:    server.ClusterOpts{Name: "C", Host: "127.0.0.1", Port: p},
			Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
			NoLog:      true,
			NoSigs:     true,
		})
		if err != nil {
			stopAll(c.servers)
			return nil, err
		}
		go ns.Start()
		c.servers = append(c.servers, ns)
		t.Cleanup(func() {
			ns.Shutdown()
			ns.WaitForShutdown()
		})
	}
	for _, ns := range c.servers {
		if !ns.ReadyForConnections(clusterWait) {
			stopAll(c.servers)
			return nil, fmt.Errorf("%s not ready for connections within %v", ns.Name(), clusterWait)
		}
	}
	return c, nil
}

// stopAll shuts servers down and waits for them.
func stopAll(servers []*server.Server) {
	for _, ns := range servers {
		ns.Shutdown()
		ns.WaitForShutdown()
	}
}

// startCluster starts three servers (S1, S2, S3 of cluster "C"), each
// with its own JetStream store under t.TempDir(), and returns once the
// JetStream meta group has a leader that sees all three as peers. The
// test shuts them down.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	// The route ports are free when picked, and may be taken by another
	// test's listener before the servers bind them: then a server never
	// gets ready, and the cluster is started again on new ports.
	var c *cluster
	var err error
	for attempt := range 3 {
		if c, err = tryCluster(t, filepath.Join(t.TempDir(), fmt.Sprint(attempt))); err == nil {
			break
		}
		t.Logf("cluster start, attempt %d: %v", attempt+1, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a JetStream meta leader that sees all three servers", func(context.Context) error {
		for _, ns := range c.servers {
			if ns.JetStreamIsLeader() {
				if peers := ns.JetStreamClusterPeers(); len(peers) != 3 {
					return fmt.Errorf("meta leader %s sees peers %v", ns.Name(), peers)
				}
				return nil
			}
		}
		return errors.New("no meta leader yet")
	})
	return c
}

// urls is every running server's client URL, for a client that fails
// over between them.
func (c *cluster) urls() string {
	var out []string
	for _, ns := range c.servers {
		if ns.Running() {
			out = append(out, ns.ClientURL())
		}
	}
	return strings.Join(out, ",")
}

// connect returns a JetStream context on a connection to the cluster that
// reconnects to another server when its own goes; the test closes it.
func (c *cluster) connect(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(c.urls(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// server returns the server named name.
func (c *cluster) server(t *testing.T, name string) *server.Server {
	t.Helper()
	for _, ns := range c.servers {
		if ns.Name() == name {
			return ns
		}
	}
	t.Fatalf("no server %q", name)
	return nil
}

// attempt is how long one poll of a waitFor may take: a request sent while
// the client reconnects, or before a new leader is elected, is tried again.
const attempt = 500 * time.Millisecond

// waitFor polls cond until it returns nil, failing the test with its last
// error after clusterWait.
func waitFor(t *testing.T, what string, cond func(ctx context.Context) error) {
	t.Helper()
	waitForWithin(t, what, attempt, cond)
}

// placed runs an operation that places copies on the cluster's servers
// (creating an R3 stream or bucket, starting a worker) until it succeeds,
// each try bounded: on a loaded machine a fresh cluster's meta group may
// still be settling (a request goes unanswered) or see a peer as offline
// for a moment ("no suitable peers for placement"). The operations are
// idempotent.
func placed(t *testing.T, what string, op func(ctx context.Context) error) {
	t.Helper()
	waitForWithin(t, what, 10*time.Second, op)
}

// waitForWithin is waitFor with each poll bounded by per.
func waitForWithin(t *testing.T, what string, per time.Duration, cond func(ctx context.Context) error) {
	t.Helper()
	wait.NoError(t, clusterWait, what, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), per)
		defer cancel()
		return cond(ctx)
	})
}

// replicated returns nil once stream name has want copies in its
// configuration and, besides its leader, want-1 peers that are current.
func replicated(ctx context.Context, js jetstream.JetStream, name string, want int) error {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return err
	}
	info := s.CachedInfo()
	if info.Config.Replicas != want {
		return fmt.Errorf("stream %s: config replicas %d, want %d", name, info.Config.Replicas, want)
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return fmt.Errorf("stream %s: no leader yet: %+v", name, info.Cluster)
	}
	if len(info.Cluster.Replicas) != want-1 {
		return fmt.Errorf("stream %s: leader %s and peers %d, want %d", name, info.Cluster.Leader, len(info.Cluster.Replicas), want-1)
	}
	for _, p := range info.Cluster.Replicas {
		if !p.Current || p.Offline {
			return fmt.Errorf("stream %s: peer %s current %v offline %v", name, p.Name, p.Current, p.Offline)
		}
	}
	return nil
}

func clusterCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*clusterWait)
	t.Cleanup(cancel)
	return ctx
}

// One cluster for the checks that keep all three servers up.
func TestReplicasOnCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	js := c.connect(t)
	ctx := clusterCtx(t)

	t.Run("EnsureStreamCreatesR3", func(t *testing.T) {
		spec := natsbus.StreamSpec{Name: "AGENTS", Subjects: []string{"agents.*.inbox", "agents.*.deferred"},
			DuplicateWindow: 2 * time.Minute, Replicas: 3}
		var s jetstream.Stream
		placed(t, "stream AGENTS created", func(ctx context.Context) error {
			var err error
			s, err = natsbus.EnsureStream(ctx, js, spec, nil)
			return err
		})
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.Replicas != 3 {
			t.Fatalf("created with %d replicas, want 3", info.Config.Replicas)
		}
		waitFor(t, "stream AGENTS on three servers", func(ctx context.Context) error { return replicated(ctx, js, "AGENTS", 3) })
		if _, err := natsbus.EnsureStream(ctx, js, spec, nil); err != nil {
			t.Fatalf("second EnsureStream (idempotent): %v", err)
		}
	})

	t.Run("EnsureStreamScalesR1ToR3", func(t *testing.T) {
		// A work queue keeps its messages without a consumer. (A consumer
		// follows its stream's count too, but the server moves it one
		// reconcile cycle, about 10s, later: too slow for this test.)
		spec := natsbus.StreamSpec{Name: "GROW", Subjects: []string{"grow.jobs"}, WorkQueue: true, Replicas: 1}
		s, err := natsbus.EnsureStream(ctx, js, spec, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Replicas; got != 1 {
			t.Fatalf("created with %d replicas, want 1", got)
		}
		if _, err := js.Publish(ctx, "grow.jobs", []byte("before")); err != nil {
			t.Fatal(err)
		}

		// Zero leaves an existing stream's count alone.
		spec.Replicas = 0
		if s, err = natsbus.EnsureStream(ctx, js, spec, nil); err != nil {
			t.Fatal(err)
		} else if got := s.CachedInfo().Config.Replicas; got != 1 {
			t.Fatalf("Replicas 0 changed the count to %d", got)
		}

		log, logs := captureLog()
		spec.Replicas = 3
		s, err = natsbus.EnsureStream(ctx, js, spec, log)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Replicas; got != 3 {
			t.Fatalf("updated to %d replicas, want 3", got)
		}
		if want := `level=INFO msg="stream replicas changed" stream=GROW replicas=3 was=1`; !strings.Contains(logs.String(), want) {
			t.Errorf("log does not say the replicas changed (%s):\n%s", want, logs)
		}
		waitFor(t, "stream GROW on three servers", func(ctx context.Context) error { return replicated(ctx, js, "GROW", 3) })
		// The message came along to every copy.
		waitFor(t, "the message on every copy", func(ctx context.Context) error {
			for _, ns := range c.servers {
				if !ns.JetStreamIsStreamCurrent(globalAccount, "GROW") {
					return fmt.Errorf("%s's copy is not current", ns.Name())
				}
			}
			info, err := s.Info(ctx)
			if err != nil {
				return err
			}
			if info.State.Msgs != 1 {
				return fmt.Errorf("%d messages, want 1", info.State.Msgs)
			}
			return nil
		})
		if m, err := s.GetMsg(ctx, 1); err != nil || string(m.Data) != "before" {
			t.Fatalf("message 1 after the change: %v, %v", m, err)
		}
	})

	t.Run("NATSKVBucketsR3", func(t *testing.T) {
		// An R1 store, as a worker before nats.replicas: 3 left it.
		st, err := natskv.Open(ctx, js, natskv.Options{Bucket: "grown", Replicas: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(ctx, "spend.a", []byte("1.25")); err != nil {
			t.Fatal(err)
		}
		_ = st.Close()
		for _, b := range []string{"fresh", "grown"} {
			log, logs := captureLog()
			var st *natskv.Store
			placed(t, "open "+b+" with 3 replicas", func(ctx context.Context) error {
				var err error
				st, err = natskv.Open(ctx, js, natskv.Options{Bucket: b, Replicas: 3, Log: log})
				return err
			})
			t.Cleanup(func() { _ = st.Close() })
			for _, name := range []string{"KV_" + b + "-state", "KV_" + b + "-lists"} {
				waitFor(t, name+" on three servers", func(ctx context.Context) error { return replicated(ctx, js, name, 3) })
			}
			if b == "grown" {
				e, err := st.Get(ctx, "spend.a")
				if err != nil || string(e.Value) != "1.25" {
					t.Fatalf("state after the change: %q, %v", e.Value, err)
				}
				if n := strings.Count(logs.String(), `msg="bucket replicas changed"`); n != 2 {
					t.Errorf("log names %d changed buckets, want 2:\n%s", n, logs)
				}
			}
		}
	})

	t.Run("WorkerOnCluster", func(t *testing.T) {
		// nats.replicas from a config file reaches the worker's stream and
		// its nats:// buckets.
		dir := t.TempDir()
		path := filepath.Join(dir, "config.yaml")
		yaml := fmt.Sprintf(`data_dir: %s
api: {listen: "127.0.0.1:0"}
nats: {url: %q, replicas: 3, stream: WORKER, subject_prefix: wk}
store: {url: "nats://wk"}
models: {fake: {provider: scripted, script: [{text: noted}]}}
agents: [{name: triage, model: fake}]
`, dir, c.urls())
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		var w *worker.Worker
		placed(t, "a worker on the cluster", func(ctx context.Context) error {
			var err error
			w, err = worker.Start(ctx, cfg, worker.Options{})
			return err
		})
		defer w.Stop(ctx)
		for _, name := range []string{"WORKER", "WORKER_SUBAGENTS", "WORKER_EVENTS", "KV_wk-state", "KV_wk-lists"} {
			waitFor(t, name+" on three servers", func(ctx context.Context) error { return replicated(ctx, js, name, 3) })
		}
	})

	t.Run("TooFewServers", func(t *testing.T) {
		_, err := natsbus.EnsureStream(ctx, js, natsbus.StreamSpec{Name: "FIVE", Subjects: []string{"five.>"}, Replicas: 5}, nil)
		if err == nil || !strings.Contains(err.Error(), "needs at least 5 servers up") {
			t.Fatalf("5 replicas on 3 servers: err = %v", err)
		}
	})
}

// The point of replicas: with 3, a message published and acked is still
// consumed after the server leading the stream is shut down, the stream
// takes new messages, and the KV state is still read and written.
func TestR3StreamOutlivesItsLeader(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	js := c.connect(t)
	ctx := clusterCtx(t)

	var s jetstream.Stream
	var st *natskv.Store
	placed(t, "stream AGENTS and the KV store with 3 replicas", func(ctx context.Context) error {
		var err error
		if s, err = natsbus.EnsureStream(ctx, js, natsbus.StreamSpec{Name: "AGENTS", Subjects: []string{"agents.*.inbox"}, Replicas: 3}, nil); err != nil {
			return err
		}
		st, err = natskv.Open(ctx, js, natskv.Options{Replicas: 3})
		return err
	})
	t.Cleanup(func() { _ = st.Close() })
	for _, name := range []string{"AGENTS", "KV_agent-worker-state", "KV_agent-worker-lists"} {
		waitFor(t, name+" on three servers", func(ctx context.Context) error { return replicated(ctx, js, name, 3) })
	}
	cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "triage", AckPolicy: jetstream.AckExplicitPolicy,
		FilterSubject: "agents.triage.inbox"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "agents.triage.inbox", []byte("disk full on db-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "halt.triage", []byte("budget")); err != nil {
		t.Fatal(err)
	}

	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader := info.Cluster.Leader
	c.server(t, leader).Shutdown()
	c.server(t, leader).WaitForShutdown()

	waitFor(t, "new leader of AGENTS", func(ctx context.Context) error {
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" || info.Cluster.Leader == leader {
			return fmt.Errorf("leader %+v (was %s)", info.Cluster, leader)
		}
		return nil
	})
	var got string
	waitFor(t, "the message from before the loss", func(ctx context.Context) error {
		msgs, err := cons.Fetch(1, jetstream.FetchMaxWait(attempt))
		if err != nil {
			return err
		}
		for m := range msgs.Messages() {
			got = string(m.Data())
			if err := m.DoubleAck(ctx); err != nil {
				return err
			}
		}
		if got == "" {
			return fmt.Errorf("no message yet: %v", msgs.Error())
		}
		return nil
	})
	if got != "disk full on db-1" {
		t.Fatalf("consumed %q", got)
	}
	waitFor(t, "a publish with one server down", func(ctx context.Context) error {
		_, err := js.Publish(ctx, "agents.triage.inbox", []byte("after"), jetstream.WithMsgID("after"))
		return err
	})
	msgs, err := cons.Fetch(1, jetstream.FetchMaxWait(clusterWait))
	if err != nil {
		t.Fatal(err)
	}
	for m := range msgs.Messages() {
		got = string(m.Data())
	}
	if got != "after" {
		t.Fatalf("consumed %q after the loss, want the message published after it", got)
	}
	waitFor(t, "the state from before the loss", func(ctx context.Context) error {
		e, err := st.Get(ctx, "halt.triage")
		if err != nil {
			return err
		}
		if string(e.Value) != "budget" {
			return fmt.Errorf("halt.triage = %q", e.Value)
		}
		_, err = st.Put(ctx, "halt.triage", []byte("lifted"))
		return err
	})
	if stillUp := slices.DeleteFunc(slices.Clone(c.servers), func(ns *server.Server) bool { return !ns.Running() }); len(stillUp) != 2 {
		t.Fatalf("%d servers running, want 2", len(stillUp))
	}
}

// logBuffer is a log's text, safe for the logger and the test at once.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// captureLog returns a logger writing text lines without the time, and
// what it wrote.
func captureLog() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})), b
}
