package redisstore_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Passwords the tests put in the environment for Options.PasswordEnv and
// SentinelPasswordEnv (set before any test runs, so tests stay parallel).
const (
	passwordEnv         = "REDISSTORE_TEST_PASSWORD"
	testPassword        = "s3cret-Pa55word"
	sentinelPasswordEnv = "REDISSTORE_TEST_SENTINEL_PASSWORD"
	testSentinelPasswd  = "sentinel-Pa55word"
)

func TestMain(m *testing.M) {
	_ = os.Setenv(passwordEnv, testPassword)
	_ = os.Setenv(sentinelPasswordEnv, testSentinelPasswd)
	code := m.Run()
	if shared.srv != nil {
		shared.srv.stop()
	}
	os.Exit(code)
}

// redisServer is a redis-server process the tests started.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{} // closed when the process has exited
	dir  string
}

// serverConfig says how to start one redis-server.
type serverConfig struct {
	// args are the server's arguments beyond the common ones, given the
	// port it listens on; nil: none.
	args func(port int) []string
	// tls, if set, is how the readiness check reaches a TLS-only server.
	tls *tls.Config
	// common: false leaves out --port, --save and friends (sentinel mode
	// takes them from args).
	bare bool
}

// startRedis starts redis-server on a free 127.0.0.1 port and waits until
// it answers PING. It retries on another port if the chosen one was taken
// in between.
func startRedis(cfg serverConfig) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server not found on PATH: these tests run against a real Redis; " +
			"install Debian's redis-server (apt-get install -y redis-server; CI's .ci/run installs it)")
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "redisstore-test-")
		if err != nil {
			return nil, err
		}
		var args []string
		if !cfg.bare {
			args = []string{
				"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
				"--save", "", "--appendonly", "no", "--daemonize", "no",
				"--dir", dir, "--loglevel", "warning",
			}
		}
		if cfg.args != nil {
			args = append(args, cfg.args(port)...)
		}
		s := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), out: &lockedBuffer{}, done: make(chan struct{}), dir: dir}
		s.cmd = exec.Command(bin, args...)
		s.cmd.Dir = dir
		s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
		s.cmd.SysProcAttr = childProcAttr()
		if err := s.cmd.Start(); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("start redis-server: %w", err)
		}
		go func() { _ = s.cmd.Wait(); close(s.done) }()
		lastErr = s.waitReady(cfg.tls, 10*time.Second)
		if lastErr == nil {
			return s, nil
		}
		s.stop()
		if !strings.Contains(lastErr.Error(), "in use") {
			return nil, lastErr
		}
	}
	return nil, lastErr
}

// waitReady polls the server with PING until it answers, it exits, or the
// deadline passes.
func (s *redisServer) waitReady(tlsCfg *tls.Config, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := rawPing(s.addr, tlsCfg)
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("redis-server on %s exited before answering PING: %s", s.addr, s.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer PING within %v: %v; output: %s", s.addr, within, err, s.out.String())
		}
	}
}

// rawPing sends PING in the Redis protocol: any reply but -LOADING means
// the server is up (-NOAUTH included).
func rawPing(addr string, tlsCfg *tls.Config) error {
	d := &net.Dialer{Timeout: time.Second}
	var conn net.Conn
	var err error
	if tlsCfg != nil {
		conn, err = tls.DialWithDialer(d, "tcp", addr, tlsCfg)
	} else {
		conn, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+") && !strings.HasPrefix(line, "-") || strings.HasPrefix(line, "-LOADING") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// stop kills the server (a process these tests started) and removes its
// directory.
func (s *redisServer) stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
	_ = os.RemoveAll(s.dir)
}

// startRedisT is startRedis for one test, which stops it at the end.
func startRedisT(t testing.TB, cfg serverConfig) *redisServer {
	t.Helper()
	s, err := startRedis(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	return s
}

// shared is the plain server most tests use, started on first use and
// stopped by TestMain.
var shared struct {
	once sync.Once
	srv  *redisServer
	err  error
}

func sharedServer(t testing.TB) *redisServer {
	t.Helper()
	shared.once.Do(func() { shared.srv, shared.err = startRedis(serverConfig{}) })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.srv
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// rawClient is a plain go-redis client to addr for a test to look at what
// the store wrote.
func rawClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitServerTime waits until d has passed on the server's clock, which is
// the one Redis expires keys on: first on the local clock, then polling
// TIME with a deadline.
func waitServerTime(t testing.TB, c redis.Cmdable, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	start, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	<-time.After(d)
	deadline := time.Now().Add(5 * time.Second)
	for {
		now, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		// Past d by more than a millisecond: Redis keeps expiries in
		// whole milliseconds and a key is expired only once the clock
		// is beyond its expiry, so a key created just before start
		// (in start's millisecond) expires up to a millisecond late.
		if now.Sub(start) > d+time.Millisecond {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's clock moved %v in %v; want %v", now.Sub(start), d+5*time.Second, d)
		}
		<-time.After(10 * time.Millisecond)
	}
}

// lockedBuffer collects a process's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
