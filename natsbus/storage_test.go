package natsbus

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/agent-worker/agent-worker/config"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestServerLogLevelsAndStorageLines(t *testing.T) {
	t.Parallel()
	buf := &syncBuffer{}
	var storage []string
	l := serverLog{
		log:       slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo})),
		onStorage: func(line string) { storage = append(storage, line) },
	}
	l.Noticef("Starting nats-server %s", "banner")
	l.Debugf("debug %d", 1)
	l.Tracef("trace %d", 1)
	l.Warnf("slow consumer %s", "x")
	l.Errorf("JetStream failed to store a msg on stream '%s': %v", "$G > S", "write /d/1.blk: no space left on device")
	l.Fatalf("Can't start JetStream: %v", "storage directory is not writable")
	out := buf.String()
	if strings.Contains(out, "banner") || strings.Contains(out, "debug 1") || strings.Contains(out, "trace 1") {
		t.Errorf("notices, debug or trace lines at Info:\n%s", out)
	}
	for _, want := range []string{
		`level=WARN msg="slow consumer x" component=nats-server`,
		`level=ERROR msg="JetStream failed to store a msg on stream '$G > S': write /d/1.blk: no space left on device" component=nats-server`,
		`level=ERROR msg="Can't start JetStream: storage directory is not writable" component=nats-server`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in:\n%s", want, out)
		}
	}
	if len(storage) != 1 || !strings.Contains(storage[0], "no space left") {
		t.Errorf("storage lines = %q, want the store failure only", storage)
	}

	buf = &syncBuffer{}
	l = serverLog{log: slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	l.Noticef("Server is ready")
	if !strings.Contains(buf.String(), `level=DEBUG msg="Server is ready" component=nats-server`) {
		t.Errorf("notice at debug level: %s", buf)
	}
}

func TestStorageErrIsNilWhenFineOrNotOurs(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	c, err := Connect(config.NATS{Listen: "-1"}, t.TempDir(), slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.StorageErr(); err != nil {
		t.Errorf("embedded, fine: %v", err)
	}
	if strings.Contains(logs.String(), "component=nats-server") {
		t.Errorf("the server's start-up notices reached the Info log:\n%s", logs)
	}

	ext, err := Connect(config.NATS{URL: c.ClientURL}, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ext.Close)
	if err := ext.StorageErr(); err != nil || ext.storage != nil {
		t.Errorf("external server: %v (monitor %v)", err, ext.storage != nil)
	}

	off := false
	core, err := Connect(config.NATS{Listen: "-1", JetStream: &off}, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(core.Close)
	if err := core.StorageErr(); err != nil || core.storage != nil {
		t.Errorf("core NATS: %v (monitor %v)", err, core.storage != nil)
	}
}

// TestPermissionViolationsCannotFloodTheLog: a publisher refused again
// and again costs one WARN line a minute, which counts the refusals it
// folded; the worker's own exposure probe's refusals are Debug.
func TestPermissionViolationsCannotFloodTheLog(t *testing.T) {
	t.Parallel()
	buf := &bytes.Buffer{}
	l := serverLog{log: slog.New(slog.NewTextHandler(buf, nil)), violations: &violations{}}
	line := `cid:7 - "v1.55.0:go" - "$G/user:publisher" - Publish Violation - Subject "$KV.agent-worker-state.pause.a"`
	for range 50 {
		l.Errorf("%s", line)
	}
	l.Errorf("%s", `cid:8 - "v1.55.0:go:`+probeName+`" - Publish Violation - Subject "$JS.API.DIRECT.GET.KV_x"`)
	if n := strings.Count(buf.String(), "\n"); n != 1 || !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "unlogged_since_last=0") {
		t.Fatalf("50 violations logged as %d lines:\n%s", n, buf)
	}
	l.violations.last = l.violations.last.Add(-violationEvery)
	buf.Reset()
	l.Errorf("%s", line)
	if !strings.Contains(buf.String(), "unlogged_since_last=49") {
		t.Fatalf("a minute later: %s, want the 49 folded refusals counted", buf)
	}
}
