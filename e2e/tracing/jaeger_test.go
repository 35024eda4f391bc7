package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// jaegerModule is the Jaeger all-in-one the test runs.
const (
	jaegerModule  = "github.com/jaegertracing/jaeger"
	jaegerVersion = "v1.76.0"
	jaegerCommand = jaegerModule + "/cmd/jaeger"
)

// jaegerBinary returns the path of the Jaeger binary: $JAEGER_BIN, else
// the one in the user's cache directory, else one built there now from
// the module proxy (go get -tool in a scratch module, then go build:
// several minutes on a small machine, once; GOCACHE makes a rebuild
// after the binary was removed take seconds). It holds the directory's
// lock, which scripts/jaeger (started by make test) holds while it
// builds, so a build under way is waited for, not repeated.
func jaegerBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("JAEGER_BIN"); p != "" {
		return p
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "agent-worker", "jaeger-"+jaegerVersion)
	bin := filepath.Join(dir, "jaeger")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	waited := time.Now()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		if w := time.Since(waited); w > time.Second {
			t.Logf("waited %v for scripts/jaeger to build Jaeger", w.Round(time.Second))
		}
		return bin
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no Jaeger at %s and no go to build it: %v", bin, err)
	}
	scratch := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	run := func(args ...string) {
		c := exec.CommandContext(ctx, gobin, args...)
		c.Dir = scratch
		// The scratch module is its own: none of the repository's
		// GOFLAGS or go.work.
		c.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-buildvcs=false")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("building Jaeger: go %v: %v\n%s", args, err, out)
		}
	}
	run("mod", "init", "scratch/jaeger")
	run("get", "-tool", jaegerCommand+"@"+jaegerVersion)
	tmp := bin + fmt.Sprintf(".%d", os.Getpid())
	run("build", "-o", tmp, jaegerCommand)
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("built Jaeger %s into %s in %v", jaegerVersion, bin, time.Since(start).Round(time.Second))
	return bin
}

// jaegerConfig is an all-in-one with in-memory storage, OTLP receivers
// and the query API on the given loopback ports, its own telemetry off.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: %[1]s
    grpc:
      endpoint: %[2]s
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %[3]s
      http:
        endpoint: %[4]s
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// jaeger is a running Jaeger.
type jaeger struct {
	query    string // http://host:port of the query API
	otlpGRPC string // host:port
	otlpHTTP string // http://host:port
}

// startJaeger runs Jaeger until the test ends and waits until its query
// API answers.
func startJaeger(t *testing.T, bin string) *jaeger {
	t.Helper()
	ports := freePorts(t, 4)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, ports[0], ports[1], ports[2], ports[3]), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "--config=file:"+cfg)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("jaeger output:\n%s", out.String())
		}
	})
	j := &jaeger{query: "http://" + ports[0], otlpGRPC: ports[2], otlpHTTP: "http://" + ports[3]}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("jaeger exited: %v\n%s", err, out.String())
		default:
		}
		resp, err := http.Get(j.query + "/api/services")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if c, err := net.Dial("tcp", j.otlpGRPC); err == nil {
					c.Close()
					return j
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("jaeger not ready after 60s:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePorts returns n loopback addresses free at the moment.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

// jaegerTrace is a trace as Jaeger's query API returns it (the parts the
// test reads).
type jaegerTrace struct {
	TraceID string       `json:"traceID"`
	Spans   []jaegerSpan `json:"spans"`
}

type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Type  string `json:"type"`
		Value any    `json:"value"`
	} `json:"tags"`
	Logs []struct {
		Fields []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"fields"`
	} `json:"logs"`
}

// tag returns the value of the span's tag key, or nil.
func (s jaegerSpan) tag(key string) any {
	for _, t := range s.Tags {
		if t.Key == key {
			return t.Value
		}
	}
	return nil
}

// traces asks Jaeger for the service's traces; raw is the answer's body.
func (j *jaeger) traces(t *testing.T, service string) (out []jaegerTrace, raw []byte) {
	t.Helper()
	resp, err := http.Get(j.query + "/api/traces?limit=100&lookback=1h&service=" + service)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, b.Bytes() // not known yet: no span of the service arrived
	}
	var body struct {
		Data []jaegerTrace `json:"data"`
	}
	if err := json.Unmarshal(b.Bytes(), &body); err != nil {
		t.Fatalf("jaeger answer: %v\n%s", err, b.String())
	}
	return body.Data, b.Bytes()
}
