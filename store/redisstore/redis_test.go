package redisstore_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/redisstore"
	"github.com/agent-worker/agent-worker/store/storetest"
)

var prefixes atomic.Int64

// uniquePrefix keeps the keys of every store a test opens apart on the
// shared server.
func uniquePrefix(name string) string {
	return fmt.Sprintf("test-%s-%d:", name, prefixes.Add(1))
}

func open(t testing.TB, url string, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := redisstore.Open(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	srv := sharedServer(t)
	raw := rawClient(t, srv.addr)
	storetest.Run(t, storetest.Backend{
		New: func(t *testing.T) store.Store {
			return open(t, "redis://"+srv.addr, redisstore.Options{Prefix: uniquePrefix("conformance")})
		},
		Elapse: func(t *testing.T, d time.Duration) { waitServerTime(t, raw, d) },
	})
}

// TestConformanceCluster runs the suite on a three-node Redis Cluster:
// every script must keep to one hash slot, or the cluster refuses it
// (CROSSSLOT).
func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	addrs := startCluster(t, 3)
	raw := rawClient(t, addrs[0])
	storetest.Run(t, storetest.Backend{
		New: func(t *testing.T) store.Store {
			return open(t, "redis+cluster://"+strings.Join(addrs[:2], ","), redisstore.Options{Prefix: uniquePrefix("cluster")})
		},
		Elapse: func(t *testing.T, d time.Duration) { waitServerTime(t, raw, d) },
	})
}

// TestConformanceSentinel runs the suite on a master found through a
// Sentinel, both with passwords from the environment.
func TestConformanceSentinel(t *testing.T) {
	t.Parallel()
	master := startRedisT(t, serverConfig{args: func(int) []string { return []string{"--requirepass", testPassword} }})
	_, masterPort, _ := net.SplitHostPort(master.addr)
	confDir := t.TempDir()
	sentinel := startRedisT(t, serverConfig{bare: true, args: func(port int) []string {
		conf := filepath.Join(confDir, fmt.Sprintf("sentinel-%d.conf", port))
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\nloglevel warning\n"+
			"requirepass %s\n"+
			"sentinel monitor mymaster 127.0.0.1 %s 1\n"+
			"sentinel auth-pass mymaster %s\n"+
			"sentinel down-after-milliseconds mymaster 60000\n",
			port, confDir, testSentinelPasswd, masterPort, testPassword)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{conf, "--sentinel"}
	}})
	raw := redis.NewClient(&redis.Options{Addr: master.addr, Password: testPassword})
	t.Cleanup(func() { _ = raw.Close() })
	url := "redis+sentinel://" + sentinel.addr + "/mymaster/2"
	opts := func() redisstore.Options {
		return redisstore.Options{
			Prefix:              uniquePrefix("sentinel"),
			PasswordEnv:         passwordEnv,
			SentinelPasswordEnv: sentinelPasswordEnv,
		}
	}

	// The store reaches the master the Sentinel names, database 2.
	s := open(t, url, opts())
	if _, err := s.Put(context.Background(), "where.am.i", []byte("here")); err != nil {
		t.Fatal(err)
	}
	if n, err := raw.Do(context.Background(), "SELECT", 2).Result(); err != nil {
		t.Fatalf("SELECT 2: %v %v", n, err)
	}

	storetest.Run(t, storetest.Backend{
		New:    func(t *testing.T) store.Store { return open(t, url, opts()) },
		Elapse: func(t *testing.T, d time.Duration) { waitServerTime(t, raw, d) },
	})

	// Without the Sentinel's password the Sentinel refuses.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	noSentinelPass := opts()
	noSentinelPass.SentinelPasswordEnv = ""
	if s, err := redisstore.Open(ctx, url, noSentinelPass); err == nil {
		_ = s.Close()
		t.Fatal("Open without the Sentinel's password succeeded")
	} else if !strings.Contains(err.Error(), `redis master "mymaster" via sentinel `+sentinel.addr) {
		t.Fatalf("error %q does not say which Sentinel", err)
	}
}

// startCluster starts n redis-servers in cluster mode, splits the hash
// slots among them and waits until every node reports the cluster ok.
func startCluster(t *testing.T, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addrs := make([]string, n)
	busPorts := make([]int, n)
	clients := make([]*redis.Client, n)
	for i := range n {
		srv := startRedisT(t, serverConfig{args: func(int) []string {
			bus, err := freePort()
			if err != nil {
				t.Fatal(err)
			}
			busPorts[i] = bus
			return []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-port", strconv.Itoa(bus), "--cluster-node-timeout", "5000"}
		}})
		addrs[i] = srv.addr
		clients[i] = rawClient(t, srv.addr)
	}
	const slots = 16384
	for i, c := range clients {
		// As redis-cli --cluster create does: distinct epochs, then slots.
		if err := c.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			t.Fatal(err)
		}
		args := []any{"CLUSTER", "ADDSLOTS"}
		for slot := i * slots / n; slot < (i+1)*slots/n; slot++ {
			args = append(args, slot)
		}
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < n; i++ {
		_, port, _ := net.SplitHostPort(addrs[i])
		if err := clients[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", port, busPorts[i]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for {
		ready := true
		for _, c := range clients {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			// ok: this node sees every slot served.
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") ||
				!strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) {
				ready = false
			}
		}
		if ready {
			return addrs
		}
		select {
		case <-ctx.Done():
			t.Fatalf("cluster of %v not ok within 30s", addrs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestDurableAcrossReconnect: what one Store wrote, a Store opened later on
// the same server, database and prefix finds, claims and lists included.
func TestDurableAcrossReconnect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := sharedServer(t)
	url := "redis://" + srv.addr + "/3"
	prefix := uniquePrefix("durable")

	s1 := open(t, url, redisstore.Options{Prefix: prefix})
	rev, err := s1.Put(ctx, "agent.oncall.halt", []byte("cost ceiling"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Create(ctx, "lease.oncall", []byte("replica-a"), time.Hour); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := s1.Append(ctx, "history.app.oncall.oncall", []byte(fmt.Sprint(i)), 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Get(ctx, "agent.oncall.halt"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Get on the closed store: err = %v, want ErrClosed", err)
	}

	s2 := open(t, url, redisstore.Options{Prefix: prefix})
	e, err := s2.Get(ctx, "agent.oncall.halt")
	if err != nil || string(e.Value) != "cost ceiling" || e.Revision != rev {
		t.Fatalf("Get after reconnect = %q rev %d, %v; want \"cost ceiling\" rev %d", e.Value, e.Revision, err, rev)
	}
	if _, err := s2.Create(ctx, "lease.oncall", []byte("replica-b"), time.Hour); !errors.Is(err, store.ErrExists) {
		t.Fatalf("Create of a claim held across the reconnect: err = %v, want ErrExists", err)
	}
	got, err := s2.Tail(ctx, "history.app.oncall.oncall", 0)
	if err != nil || fmt.Sprintf("%s", got) != "[2 3 4]" {
		t.Fatalf("list after reconnect = %s, %v; want [2 3 4]", got, err)
	}
	// The URL's /3 is the database the state lives in.
	for db, want := range map[int]int64{3: 1, 0: 0} {
		c := redis.NewClient(&redis.Options{Addr: srv.addr, DB: db})
		n, err := c.Exists(ctx, prefix+"k:agent.oncall.halt").Result()
		_ = c.Close()
		if err != nil || n != want {
			t.Errorf("database %d holds the key %d times (%v), want %d", db, n, err, want)
		}
	}
}

// TestRetriedWritesApplyOnce sends each write twice with one token, as
// go-redis does when the reply to the first was lost.
func TestRetriedWritesApplyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := sharedServer(t)
	s := open(t, "redis://"+srv.addr, redisstore.Options{Prefix: uniquePrefix("retry")})

	c1, err := s.CreateWithToken(ctx, "claim.retry", []byte("mine"), time.Minute, "tok-create")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := s.CreateWithToken(ctx, "claim.retry", []byte("mine"), time.Minute, "tok-create"); err != nil || again != c1 {
		t.Fatalf("retried Create = rev %d, %v; want the first's rev %d (it won)", again, err, c1)
	}
	if _, err := s.CreateWithToken(ctx, "claim.retry", []byte("theirs"), time.Minute, "tok-other"); !errors.Is(err, store.ErrExists) {
		t.Fatalf("another Create: err = %v, want ErrExists", err)
	}

	p1, err := s.PutWithToken(ctx, "k.retry", []byte("a"), "tok-put")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := s.PutWithToken(ctx, "k.retry", []byte("a"), "tok-put"); err != nil || again != p1 {
		t.Fatalf("retried Put = rev %d, %v; want %d (no second write)", again, err, p1)
	}
	u1, err := s.UpdateWithToken(ctx, "k.retry", []byte("b"), p1, "tok-update")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := s.UpdateWithToken(ctx, "k.retry", []byte("b"), p1, "tok-update"); err != nil || again != u1 {
		t.Fatalf("retried Update = rev %d, %v; want %d, not a conflict", again, err, u1)
	}
	if _, err := s.UpdateWithToken(ctx, "k.retry", []byte("c"), p1, "tok-stale"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale Update: err = %v, want ErrConflict", err)
	}
	if e, err := s.Get(ctx, "k.retry"); err != nil || string(e.Value) != "b" || e.Revision != u1 {
		t.Fatalf("Get = %q rev %d, %v; want b rev %d", e.Value, e.Revision, err, u1)
	}

	for range 2 {
		if err := s.AppendWithToken(ctx, "hist.retry", []byte("once"), 10, "tok-append"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendWithToken(ctx, "hist.retry", []byte("next"), 10, "tok-append-2"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Tail(ctx, "hist.retry", 0); err != nil || fmt.Sprintf("%s", got) != "[once next]" {
		t.Fatalf("list = %s, %v; want [once next]", got, err)
	}
}

// TestKeyLayoutAndTTL pins what the store leaves in Redis: one hash per
// key, a list and its token key per list, ttls only where Create set one,
// and nothing else (no per-key counters left behind by deletes).
func TestKeyLayoutAndTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := sharedServer(t)
	raw := rawClient(t, srv.addr)
	prefix := uniquePrefix("layout")
	s := open(t, "redis://"+srv.addr, redisstore.Options{Prefix: prefix})

	if _, err := s.Create(ctx, "lease.hour", []byte("v"), time.Hour); err != nil {
		t.Fatal(err)
	}
	pttl := func(key string) time.Duration {
		d, err := raw.PTTL(ctx, prefix+"k:"+key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := pttl("lease.hour"); d <= time.Hour-time.Minute || d > time.Hour {
		t.Fatalf("PTTL after Create ttl 1h = %v", d)
	}
	rev, err := s.Create(ctx, "lease.updated", []byte("v"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "lease.updated", []byte("v2"), rev); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "lease.put", []byte("v"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "lease.put", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "claim.forever", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"lease.updated", "lease.put", "claim.forever"} {
		if d := pttl(key); d != -1 {
			t.Errorf("%s: PTTL = %v, want none (-1)", key, d)
		}
	}
	if _, err := s.Put(ctx, "gone", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "hist.x", []byte("item"), 2); err != nil {
		t.Fatal(err)
	}

	fields, err := raw.HGetAll(ctx, prefix+"k:lease.hour").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(fields) != 3 || fields["v"] != "v" || fields["r"] == "" || fields["w"] == "" {
		t.Errorf("hash of a key = %v, want v, r and w", fields)
	}
	keys, err := raw.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	want := []string{"k:claim.forever", "k:lease.hour", "k:lease.put", "k:lease.updated", "l:{hist.x}", "l:{hist.x}:w"}
	for i := range want {
		want[i] = prefix + want[i]
	}
	if !slices.Equal(keys, want) {
		t.Errorf("keys under the prefix:\n got %q\nwant %q", keys, want)
	}
}

// TestRevisionsAreTimeSeeded: a key's first revision comes from the
// server's clock in microseconds, so revisions keep increasing across a
// Delete without a counter left behind.
func TestRevisionsAreTimeSeeded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := sharedServer(t)
	raw := rawClient(t, srv.addr)
	s := open(t, "redis://"+srv.addr, redisstore.Options{Prefix: uniquePrefix("revs")})
	before, err := raw.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	r1, err := s.Put(ctx, "k", []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	if r1 < uint64(before.UnixMicro()) {
		t.Fatalf("first revision %d is below the server's clock %d µs", r1, before.UnixMicro())
	}
	var last uint64
	for i := range 50 {
		r, err := s.Put(ctx, "k", []byte("v"))
		if err != nil {
			t.Fatal(err)
		}
		if r <= last {
			t.Fatalf("write %d: revision %d after %d", i, r, last)
		}
		last = r
		if err := s.Delete(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
}

func TestInvalidKeysAreRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := sharedServer(t)
	s := open(t, "redis://"+srv.addr, redisstore.Options{Prefix: uniquePrefix("invalid")})
	for _, key := range []string{"", ".a", "a.", "a..b", "a b", "a.*", "a.{b}", "agent.ö", "a\nb"} {
		calls := storetest.EveryCall(ctx, s, key)
		for name, call := range calls {
			if err := call(); !errors.Is(err, store.ErrInvalidKey) {
				t.Errorf("%s(%q): err = %v, want ErrInvalidKey", name, key, err)
			}
		}
	}
}

func TestBinaryValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := sharedServer(t)
	s := open(t, "redis://"+srv.addr, redisstore.Options{Prefix: uniquePrefix("binary")})
	v := make([]byte, 256<<10)
	_, _ = rand.Read(v)
	v[0], v[1] = 0, 0xff
	rev, err := s.Put(ctx, "big.value", v)
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.Get(ctx, "big.value")
	if err != nil || string(e.Value) != string(v) || e.Revision != rev {
		t.Fatalf("256 KiB binary value did not round-trip: %d bytes rev %d, %v", len(e.Value), e.Revision, err)
	}
	if err := s.Append(ctx, "big.list", v, 1); err != nil {
		t.Fatal(err)
	}
	items, err := s.Tail(ctx, "big.list", 1)
	if err != nil || len(items) != 1 || string(items[0]) != string(v) {
		t.Fatalf("binary list item did not round-trip: %d items, %v", len(items), err)
	}
}

func TestPasswords(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := startRedisT(t, serverConfig{args: func(int) []string { return []string{"--requirepass", testPassword} }})

	fromEnv := open(t, "redis://"+srv.addr, redisstore.Options{Prefix: uniquePrefix("auth"), PasswordEnv: passwordEnv})
	if _, err := fromEnv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	fromURL := open(t, "redis://:"+testPassword+"@"+srv.addr+"/1", redisstore.Options{Prefix: uniquePrefix("auth")})
	if _, err := fromURL.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}

	const wrong = "Wrong-Secret-99"
	for _, tc := range []struct {
		url, want string
	}{
		{"redis://:" + wrong + "@" + srv.addr, "WRONGPASS"},
		{"redis://default:" + wrong + "@" + srv.addr, "WRONGPASS"},
		{"redis://" + srv.addr, "NOAUTH"},
	} {
		s, err := redisstore.Open(ctx, tc.url, redisstore.Options{})
		if err == nil {
			_ = s.Close()
			t.Errorf("Open %s: no error", tc.url)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "redisstore: open: redis at "+srv.addr+": ") || !strings.Contains(msg, tc.want) {
			t.Errorf("Open error %q: want \"redisstore: open: redis at %s: ...%s...\"", msg, srv.addr, tc.want)
		}
		if strings.Contains(msg, wrong) || strings.Contains(msg, testPassword) {
			t.Errorf("Open error %q shows a password", msg)
		}
	}
}

func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	port, err := freePort() // nothing listens there now
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := redisstore.Open(ctx, "redis://:hunter2@"+addr+"/0", redisstore.Options{})
	if err == nil {
		_ = s.Close()
		t.Fatal("Open of a closed port succeeded")
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "redisstore: open: redis at "+addr+": ") ||
		!strings.Contains(msg, "connection refused") || strings.Contains(msg, "hunter2") {
		t.Fatalf("Open error %q: want \"redisstore: open: redis at %s: ... connection refused\", no password", msg, addr)
	}

	// A done context ends Open with the context's error.
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if _, err := redisstore.Open(done, "redis://"+addr, redisstore.Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Open with a cancelled context: err = %v, want context.Canceled", err)
	}
}

func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	roots := writeTestCerts(t, dir)
	clientTLS := &tls.Config{RootCAs: roots}
	srv := startRedisT(t, serverConfig{
		tls: clientTLS,
		args: func(port int) []string {
			return []string{"--port", "0", "--tls-port", strconv.Itoa(port),
				"--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server-key.pem"),
				"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"), "--tls-auth-clients", "no"}
		},
	})
	ctx := context.Background()
	s := open(t, "rediss://"+srv.addr+"/1", redisstore.Options{Prefix: uniquePrefix("tls"), TLS: clientTLS})
	rev, err := s.Put(ctx, "over.tls", []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	if e, err := s.Get(ctx, "over.tls"); err != nil || e.Revision != rev {
		t.Fatalf("Get over TLS = rev %d, %v; want %d", e.Revision, err, rev)
	}

	// Without the CA the server's certificate is not trusted.
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if s, err := redisstore.Open(tctx, "rediss://"+srv.addr, redisstore.Options{}); err == nil {
		_ = s.Close()
		t.Fatal("Open trusted a certificate from an unknown CA")
	} else if !strings.Contains(err.Error(), "redis at "+srv.addr) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Open error %q: want one naming the server and the certificate", err)
	}
}

// writeTestCerts writes a CA and a server certificate for 127.0.0.1 into
// dir (ca.pem, server.pem, server-key.pem) and returns a pool with the CA.
func writeTestCerts(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redisstore test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{
		"ca.pem":         {Type: "CERTIFICATE", Bytes: caDER},
		"server.pem":     {Type: "CERTIFICATE", Bytes: der},
		"server-key.pem": {Type: "PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool
}

// logRecords collects what a store logs.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r)
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

func (l *logRecords) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range l.recs {
		fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
		b.WriteString("\n")
	}
	return b.String()
}

func TestOpenLogs(t *testing.T) {
	t.Parallel()
	evicting := startRedisT(t, serverConfig{args: func(int) []string {
		return []string{"--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru", "--requirepass", testPassword}
	}})
	logs := &logRecords{}
	open(t, "redis://:"+testPassword+"@"+evicting.addr, redisstore.Options{Log: slog.New(logs)})
	got := logs.text()
	if !strings.Contains(got, "WARN") || !strings.Contains(got, "maxmemory_policy=allkeys-lru") || !strings.Contains(got, "noeviction") {
		t.Errorf("logs on a server that evicts:\n%s\nwant a warning naming allkeys-lru and noeviction", got)
	}
	if !strings.Contains(got, "INFO state store open") || !strings.Contains(got, "target=redis at "+evicting.addr) {
		t.Errorf("logs:\n%s\nwant the open line with the target", got)
	}
	if strings.Contains(got, testPassword) {
		t.Errorf("logs show the password:\n%s", got)
	}

	quiet := &logRecords{}
	open(t, "redis://"+sharedServer(t).addr, redisstore.Options{Log: slog.New(quiet)})
	if got := quiet.text(); strings.Contains(got, "WARN") {
		t.Errorf("warning on a noeviction server:\n%s", got)
	}
}
