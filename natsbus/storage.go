package natsbus

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ErrStorage is wrapped by every error StorageErr returns.
var ErrStorage = errors.New("JetStream storage failed")

const (
	// storageCheckEvery is how often the monitor looks at the embedded
	// server's store; a storage error line in the server's log makes it
	// look at once.
	storageCheckEvery = time.Second
	// storageRetryEvery spaces out restarts of JetStream that did not
	// bring the store back.
	storageRetryEvery = 5 * time.Second
	// probeBytes is how much must be writable (and fsync-able) in the
	// store directory before JetStream is restarted: a restart on a disk
	// with a few bytes free would only fail again.
	probeBytes = 1 << 20
	// probePattern names the probe file, in the directory handed to the
	// server as its store dir (the server keeps its files in the
	// "jetstream" directory under it, so the probe is never taken for an
	// account or a stream).
	probePattern = ".agent-worker-space-probe-*"
)

// storageMonitor watches the embedded server's JetStream store and, once
// it has failed, restarts JetStream when the store is writable again.
//
// Why a restart: a standalone nats-server does not turn JetStream off
// when the disk fills. The write error sticks to the file store and to the
// stream (filestore.go setWriteErr, stream.go setWriteErrLocked; nothing
// ever clears them), and the stream stops answering publishes (stream.go
// processJetStreamMsg: "We don't want to respond back to the user"), so
// publishers time out until the stream is loaded afresh from disk.
// ShutdownJetStream followed by EnableJetStream does that, keeping
// everything on disk: it is what the server itself does on a config
// reload after it disabled JetStream (jetstream.go restartJetStream).
type storageMonitor struct {
	srv *server.Server
	// jsCfg is JetStream's configuration as it started, with StoreDir
	// set back to what the server was given: a restart keeps the limits
	// (notably MaxStore, which the server otherwise derives again from
	// the space free at that moment).
	jsCfg    server.JetStreamConfig
	probeDir string
	log      *slog.Logger

	failed   atomic.Pointer[error] // the current failure; nil while fine
	lines    atomic.Uint64         // storage error lines the server logged
	lastLine atomic.Pointer[string]
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	// Set by start, before the goroutine runs.
	started   bool
	restarted func()

	// Owned by run.
	baseline    uint64 // lines before the last (re)start of JetStream
	since       time.Time
	lastRestart time.Time
	probeBuf    []byte
}

// newStorageMonitor returns a monitor for the store dir handed to the
// server; it receives the server's log lines at once, and is started
// with start once the server runs.
func newStorageMonitor(storeDir string, log *slog.Logger) *storageMonitor {
	return &storageMonitor{
		probeDir: storeDir,
		log:      log,
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// start binds the monitor to the running server, whose JetStream must
// have started, and starts watching it. After each recovery, it calls
// restarted (in its own goroutine, which Close waits for).
func (m *storageMonitor) start(srv *server.Server, restarted func()) {
	m.srv, m.restarted = srv, restarted
	if cfg := srv.JetStreamConfig(); cfg != nil {
		m.jsCfg = *cfg
	}
	m.jsCfg.StoreDir = m.probeDir
	m.started = true
	go m.run()
}

// serverLogLine is serverLog's onStorage: called by the server's logger,
// possibly with the server's locks held, so it never blocks.
func (m *storageMonitor) serverLogLine(line string) {
	m.lastLine.Store(&line)
	m.lines.Add(1)
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// close stops the monitor and waits for it; safe to call more than once
// and when it was never started.
func (m *storageMonitor) close() {
	m.stopOnce.Do(func() { close(m.stop) })
	if m.started {
		<-m.done
	}
}

func (m *storageMonitor) err() error {
	if p := m.failed.Load(); p != nil {
		return *p
	}
	return nil
}

func (m *storageMonitor) run() {
	defer close(m.done)
	t := time.NewTicker(storageCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		case <-m.kick:
		}
		m.check()
	}
}

// check notes a new failure, or tries to recover from the current one.
func (m *storageMonitor) check() {
	if m.failed.Load() == nil {
		if err := m.detect(); err != nil {
			m.failed.Store(&err)
			m.since = time.Now()
			m.log.Error("JetStream storage failed", "error", err, "store_dir", m.probeDir,
				"hint", "free space on the data dir's filesystem; JetStream restarts by itself once it can write again")
		}
		return
	}
	if err := m.probe(); err != nil {
		return // still full (or not writable)
	}
	if !m.lastRestart.IsZero() && time.Since(m.lastRestart) < storageRetryEvery {
		return
	}
	m.lastRestart = time.Now()
	err := m.restart()
	if err == nil {
		err = m.detect()
	}
	if err != nil {
		m.log.Warn("JetStream storage: the store is writable again but JetStream did not recover; retrying",
			"error", err, "retry_in", storageRetryEvery)
		return
	}
	m.failed.Store(nil)
	m.lastRestart = time.Time{}
	m.log.Info("JetStream storage recovered", "store_dir", m.probeDir, "after", time.Since(m.since).Round(time.Millisecond))
	if m.restarted != nil {
		m.restarted()
	}
}

// detect reports a failed store: JetStream turned off by the server (it
// does that on write permission errors and, when clustered, on running
// out of space), a storage error line in its log since JetStream last
// (re)started, or a stream whose store has a write error.
func (m *storageMonitor) detect() error {
	if !m.srv.JetStreamEnabled() {
		return fmt.Errorf("%w: the embedded server turned JetStream off", ErrStorage)
	}
	// Healthz of a standalone server reads the store directory and looks
	// up each stream; its other errors (a stream being created or deleted
	// meanwhile) are not storage failures.
	hs := m.srv.Healthz(&server.HealthzOptions{Details: true})
	for _, e := range hs.Errors {
		if e.Type == server.HealthzErrorStream && strings.Contains(e.Error, "write error") {
			return fmt.Errorf("%w: %s", ErrStorage, e.Error)
		}
	}
	if m.lines.Load() > m.baseline {
		if p := m.lastLine.Load(); p != nil {
			return fmt.Errorf("%w: %s", ErrStorage, *p)
		}
	}
	return nil
}

// probe writes and syncs probeBytes in the store directory, and removes
// the file again.
func (m *storageMonitor) probe() error {
	f, err := os.CreateTemp(m.probeDir, probePattern)
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }()
	if m.probeBuf == nil {
		m.probeBuf = make([]byte, probeBytes)
	}
	_, err = f.Write(m.probeBuf)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// restart loads JetStream afresh from disk, with the limits it started
// with.
func (m *storageMonitor) restart() error {
	if m.srv.JetStreamEnabled() {
		if err := m.srv.ShutdownJetStream(); err != nil {
			return fmt.Errorf("shut JetStream down: %w", err)
		}
	}
	if m.srv.JetStreamConfig() != nil {
		// The server turned JetStream off and its shutdown is still
		// running (it runs in a goroutine of its own).
		return errors.New("JetStream is still shutting down")
	}
	m.baseline = m.lines.Load()
	cfg := m.jsCfg // EnableJetStream changes the config it is given
	if err := m.srv.EnableJetStream(&cfg); err != nil {
		_ = m.srv.ShutdownJetStream() // as the server's restartJetStream does
		return fmt.Errorf("enable JetStream: %w", err)
	}
	return nil
}

// removeStaleProbes removes probe files a crash left behind.
func removeStaleProbes(dir string) {
	stale, _ := filepath.Glob(filepath.Join(dir, probePattern))
	for _, f := range stale {
		_ = os.Remove(f)
	}
}

// StorageErr reports a failure of the embedded server's JetStream store,
// as an error wrapping ErrStorage that says what failed: the disk is
// full, read-only or not writable, so a stream or KV bucket no longer
// accepts writes (publishes to it time out: the server does not answer
// them) or the server turned JetStream off. It is nil while the store is
// fine, in core NATS mode (nats.jetstream: false), and when the server is
// external: its own monitoring covers its disk, and the client has no
// cheap, reliable signal for it (a publish timing out has many causes).
//
// It never blocks and costs an atomic load, so /readyz and health checks
// may call it as often as they like. A monitor goroutine, started by
// Connect and stopped by Close, sets it within about a second of the
// failure (at once when the server logs the write error) and clears it
// once JetStream has recovered. It recovers by itself, without a restart
// of the worker or of the server: once 1 MiB can be written and synced in
// the store directory again (checked every second while failed), the
// monitor restarts JetStream from what is on disk, with the limits it
// started with, then makes the worker's connection reconnect so that
// consumers pull again at once (the restart drops their pending pull
// requests). Streams, consumers and KV buckets, and every message the
// server acknowledged, are there again; a publish that was not
// acknowledged (it timed out) may be lost and must be retried. If
// JetStream does not come back, it retries every 5 seconds while the
// disk has room. Each episode logs "JetStream storage failed" (Error)
// once and "JetStream storage recovered" (Info) once; the server's own
// errors are in the log too, with component=nats-server.
func (c *Conn) StorageErr() error {
	if c.storage == nil {
		return nil
	}
	return c.storage.err()
}
