package natskv_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/natskv"
	"github.com/agent-worker/agent-worker/store/storetest"
)

// startServer runs an in-process nats-server with JetStream on disk under
// dir; the test shuts it down.
func startServer(t *testing.T, dir string) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready within 10s")
	}
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	return ns
}

// connect returns a JetStream context on a connection to ns that the test
// closes.
func connect(t *testing.T, ns *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(ns.ClientURL(), nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func open(t *testing.T, js jetstream.JetStream, opts natskv.Options) *natskv.Store {
	t.Helper()
	s, err := natskv.Open(context.Background(), js, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	ns := startServer(t, t.TempDir())
	_, js := connect(t, ns)
	var n int
	var bucket string // the newest store's; the suite's subtests run one at a time
	storetest.Run(t, storetest.Backend{
		New: func(t *testing.T) store.Store {
			n++
			bucket = fmt.Sprintf("conformance%d", n)
			s, err := natskv.Open(context.Background(), js, natskv.Options{Bucket: bucket})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		// The server expires keys on its own clock, so Elapse waits d on a
		// timer (that much real time must pass) and then polls, every 20ms
		// up to a deadline, until the server has removed every key whose
		// ttl ended by then: its expiry timer runs up to about a second
		// late.
		Elapse: func(t *testing.T, d time.Duration) {
			until := time.Now().Add(d)
			<-time.After(d)
			deadline := time.Now().Add(5 * time.Second)
			for {
				due, err := dueKeys(js, bucket, until)
				if err != nil {
					t.Fatal(err)
				}
				if len(due) == 0 {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("keys %q still held 5s after their ttl ended", due)
				}
				<-time.After(20 * time.Millisecond)
			}
		},
	})
}

// dueKeys lists the keys of the bucket's state whose ttl ended by until
// but that the server still holds.
func dueKeys(js jetstream.JetStream, bucket string, until time.Time) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, bucket+"-state")
	if err != nil {
		return nil, err
	}
	stream, err := js.Stream(ctx, "KV_"+bucket+"-state")
	if err != nil {
		return nil, err
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = keys.Stop() }()
	var due []string
	for key := range keys.Keys() {
		m, err := stream.GetLastMsgForSubject(ctx, "$KV."+bucket+"-state."+key)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ttl, ok := msgTTL(m)
		if ok && !m.Time.Add(ttl).After(until) {
			due = append(due, key)
		}
	}
	return due, nil
}

// msgTTL reads the Nats-TTL header: a Go duration or whole seconds.
func msgTTL(m *jetstream.RawStreamMsg) (time.Duration, bool) {
	h := m.Header.Get(jetstream.MsgTTLHeader)
	if h == "" {
		return 0, false
	}
	if d, err := time.ParseDuration(h); err == nil {
		return d, true
	}
	sec, err := strconv.Atoi(h)
	return time.Duration(sec) * time.Second, err == nil
}

func TestSurvivesServerRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()

	ns1 := startServer(t, dir)
	nc1, js1 := connect(t, ns1)
	s1 := open(t, js1, natskv.Options{Bucket: "durable"})
	rev, err := s1.Put(ctx, "agent.oncall.halt", []byte("cost ceiling"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Create(ctx, "lease.oncall", []byte("replica-a"), time.Hour); err != nil {
		t.Fatal(err)
	}
	shortLived := time.Now().Add(time.Second)
	if _, err := s1.Create(ctx, "lease.short", []byte("replica-a"), time.Second); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := s1.Append(ctx, "history.app.oncall.oncall", []byte(fmt.Sprint(i)), 3); err != nil {
			t.Fatal(err)
		}
	}
	_ = s1.Close()
	nc1.Close()
	ns1.Shutdown()
	ns1.WaitForShutdown()
	// Let lease.short's ttl end while the server is down.
	<-time.After(time.Until(shortLived))

	ns2 := startServer(t, dir)
	_, js2 := connect(t, ns2)
	s2 := open(t, js2, natskv.Options{Bucket: "durable"})
	e, err := s2.Get(ctx, "agent.oncall.halt")
	if err != nil || string(e.Value) != "cost ceiling" || e.Revision != rev {
		t.Fatalf("Get after restart = %q rev %d, %v; want \"cost ceiling\" rev %d", e.Value, e.Revision, err, rev)
	}
	if _, err := s2.Create(ctx, "lease.oncall", []byte("replica-b"), time.Hour); !errors.Is(err, store.ErrExists) {
		t.Fatalf("Create of a claim held across the restart: err = %v, want ErrExists", err)
	}
	got, err := s2.Tail(ctx, "history.app.oncall.oncall", 0)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%s", got) != "[2 3 4]" {
		t.Fatalf("list after restart = %s, want [2 3 4]", got)
	}
	// A ttl that ended while the server was down has ended: the server
	// expires it on recovery (polled, as recovery may finish after
	// ReadyForConnections).
	for deadline := time.Now().Add(5 * time.Second); ; {
		_, err := s2.Get(ctx, "lease.short")
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("claim whose ttl ended during the restart still held 5s later: err = %v", err)
		}
		<-time.After(20 * time.Millisecond)
	}
	if _, err := s2.Create(ctx, "lease.short", []byte("replica-b"), time.Second); err != nil {
		t.Fatalf("Create of a claim that expired during the restart: %v", err)
	}
}

func TestAppendTrimsWhatTheServerHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := startServer(t, t.TempDir())
	_, js := connect(t, ns)
	s := open(t, js, natskv.Options{Bucket: "trim"})
	for i := range 10 {
		if err := s.Append(ctx, "hist.trim", []byte(fmt.Sprint(i)), 4); err != nil {
			t.Fatal(err)
		}
	}
	// Bounded storage, not only a bounded read.
	stream, err := js.Stream(ctx, "KV_trim-lists")
	if err != nil {
		t.Fatal(err)
	}
	const subj = "$KV.trim-lists.hist.trim"
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	if got := info.State.Subjects[subj]; got != 4 {
		t.Fatalf("server holds %d items of a list kept at 4", got)
	}
}

func TestOpenIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := startServer(t, t.TempDir())
	_, js := connect(t, ns)
	first := open(t, js, natskv.Options{})
	if _, err := first.Put(ctx, "agent.demo.pause", []byte("paused")); err != nil {
		t.Fatal(err)
	}
	second := open(t, js, natskv.Options{})
	e, err := second.Get(ctx, "agent.demo.pause")
	if err != nil || string(e.Value) != "paused" {
		t.Fatalf("second Open lost the first's state: %q, %v", e.Value, err)
	}

	// The buckets are what the store's guarantees rest on.
	for bucket, want := range map[string]struct {
		history int64
		marker  time.Duration
	}{
		natskv.DefaultBucket + "-state": {1, time.Minute},
		natskv.DefaultBucket + "-lists": {natskv.MaxListItems, 0},
	} {
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			t.Fatal(err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.History() != want.history || st.LimitMarkerTTL() != want.marker {
			t.Errorf("%s: history %d, limit marker ttl %v; want %d, %v",
				bucket, st.History(), st.LimitMarkerTTL(), want.history, want.marker)
		}
	}
}

func TestLargeValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := startServer(t, t.TempDir())
	nc, js := connect(t, ns)
	s := open(t, js, natskv.Options{})

	big := make([]byte, 512<<10)
	_, _ = rand.Read(big)
	if _, err := s.Put(ctx, "big.value", big); err != nil {
		t.Fatal(err)
	}
	e, err := s.Get(ctx, "big.value")
	if err != nil || !bytes.Equal(e.Value, big) {
		t.Fatalf("512 KiB value did not round-trip: %d bytes, %v", len(e.Value), err)
	}
	if err := s.Append(ctx, "big.list", big, 2); err != nil {
		t.Fatal(err)
	}
	items, err := s.Tail(ctx, "big.list", 1)
	if err != nil || len(items) != 1 || !bytes.Equal(items[0], big) {
		t.Fatalf("512 KiB list item did not round-trip: %d items, %v", len(items), err)
	}

	tooBig := make([]byte, nc.MaxPayload()+1)
	_, err = s.Put(ctx, "big.toobig", tooBig)
	if err == nil || !strings.Contains(err.Error(), "max_payload") {
		t.Fatalf("Put beyond max_payload: err = %v, want one naming max_payload", err)
	}
}

func TestClosedStoreRefusesEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := startServer(t, t.TempDir())
	nc, js := connect(t, ns)
	s := open(t, js, natskv.Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	calls := storetest.EveryCall(ctx, s, "k")
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: err = %v, want ErrClosed", name, err)
		}
	}
	if !nc.IsConnected() {
		t.Fatal("Close closed the caller's NATS connection")
	}
}

func TestInvalidKeysAreRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := startServer(t, t.TempDir())
	_, js := connect(t, ns)
	s := open(t, js, natskv.Options{})
	for _, key := range []string{"", ".a", "a.", "a..b", "a b", "a.*", "a.>", "agent.ö", "a\nb"} {
		calls := storetest.EveryCall(ctx, s, key)
		for name, call := range calls {
			if err := call(); !errors.Is(err, store.ErrInvalidKey) {
				t.Errorf("%s(%q): err = %v, want ErrInvalidKey", name, key, err)
			}
		}
	}
	// The keys callers use are valid as they are.
	for _, key := range []string{"history.agent-worker.oncall.oncall", "handled.oncall.3f2a_9C", "a"} {
		if _, err := s.Put(ctx, key, []byte("v")); err != nil {
			t.Errorf("Put(%q): %v", key, err)
		}
	}
}

func TestUpdateWithRevisionZero(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := startServer(t, t.TempDir())
	_, js := connect(t, ns)
	s := open(t, js, natskv.Options{})
	// JetStream reads expected revision 0 as "must not exist"; Update must
	// not turn into a Create.
	if _, err := s.Update(ctx, "cas.zero", []byte("v"), 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Update rev 0 of a missing key: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx, "cas.zero"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Update rev 0 created the key: Get err = %v", err)
	}
	if _, err := s.Put(ctx, "cas.zero", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "cas.zero", []byte("v2"), 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Update rev 0 of a present key: err = %v, want ErrConflict", err)
	}
}

func TestCreateTTLIsRoundedUpToWholeSeconds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := startServer(t, t.TempDir())
	_, js := connect(t, ns)
	s := open(t, js, natskv.Options{Bucket: "ttl"})
	stream, err := js.Stream(ctx, "KV_ttl-state")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ttl, want time.Duration
	}{
		{time.Millisecond, time.Second}, // the server refuses less than 1s
		{1500 * time.Millisecond, 2 * time.Second},
		{time.Minute, time.Minute},
	} {
		key := fmt.Sprintf("lease.ttl%d", tc.ttl.Milliseconds())
		if _, err := s.Create(ctx, key, []byte("v"), tc.ttl); err != nil {
			t.Fatalf("Create ttl %v: %v", tc.ttl, err)
		}
		m, err := stream.GetLastMsgForSubject(ctx, "$KV.ttl-state."+key)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := msgTTL(m); got != tc.want {
			t.Errorf("Create ttl %v: server holds ttl %v, want %v", tc.ttl, got, tc.want)
		}
	}
}

// logCounter counts the warnings a store logs.
type logCounter struct {
	mu    sync.Mutex
	warns int
}

func (c *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Level == slog.LevelWarn {
		c.warns++
	}
	return nil
}
func (c *logCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCounter) WithGroup(string) slog.Handler      { return c }

func TestListsAreCappedAtMaxListItems(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := startServer(t, t.TempDir())
	_, js := connect(t, ns)
	logs := &logCounter{}
	s := open(t, js, natskv.Options{Log: slog.New(logs)})
	const appended = natskv.MaxListItems + 6
	for i := range appended {
		if err := s.Append(ctx, "hist.big", []byte(fmt.Sprint(i)), 1000); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.Tail(ctx, "hist.big", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != natskv.MaxListItems || string(all[0]) != "6" || string(all[len(all)-1]) != fmt.Sprint(appended-1) {
		t.Fatalf("list holds %d items %s..%s; want the newest %d, 6..%d",
			len(all), all[0], all[len(all)-1], natskv.MaxListItems, appended-1)
	}
	three, err := s.Tail(ctx, "hist.big", 3)
	if err != nil || fmt.Sprintf("%s", three) != fmt.Sprintf("[%d %d %d]", appended-3, appended-2, appended-1) {
		t.Fatalf("Tail 3 = %s, %v", three, err)
	}
	if logs.warns != 1 {
		t.Fatalf("%d warnings for a keep beyond the cap, want 1 (logged once)", logs.warns)
	}
}
