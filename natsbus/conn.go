package natsbus

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/config"
)

// Conn is the worker's connection to NATS and, when it runs one, the
// embedded server.
type Conn struct {
	NC *nats.Conn
	// JS is nil in core NATS mode (nats.jetstream: false).
	JS jetstream.JetStream
	// ClientURL is where other processes (the nats CLI, agent-worker
	// send) reach the server.
	ClientURL string
	// Embedded reports whether the server runs in this process.
	Embedded bool

	server  *server.Server
	access  *clientAccess   // nil unless the server is embedded
	storage *storageMonitor // nil unless the server is embedded with JetStream
	// dial is how NC was connected (server URL, credentials, the
	// in-process server), for Dial.
	dial    []nats.Option
	jsOn    bool
	log     *slog.Logger
	closing atomic.Bool // Close was called: a disconnect is expected
	// reconnecting: the connection was made to reconnect on purpose; the
	// disconnect is expected.
	reconnecting atomic.Bool
}

// Connect starts the embedded server when cfg.URL is empty (JetStream
// files under dataDir/jetstream, so state survives a restart) or connects
// to cfg.URL with its credentials. The connection reconnects forever with
// backoff and jitter; losing it never fails Connect's caller later on.
//
// The embedded server logs into log, with component=nats-server: its
// errors as Error, its warnings as Warn, everything else as Debug. With
// JetStream on, Connect fails if the embedded server's JetStream did not
// start, and starts a monitor of its store that StorageErr reports and
// that recovers JetStream once the disk has room again; Close stops it.
func Connect(cfg config.NATS, dataDir string, log *slog.Logger) (*Conn, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Conn{log: log}
	jsOn := cfg.JetStream == nil || *cfg.JetStream
	opts := c.clientOptions()
	if cfg.URL == "" {
		storeDir := filepath.Join(dataDir, "jetstream")
		srvLog := serverLog{log: log, violations: &violations{}}
		if jsOn {
			c.storage = newStorageMonitor(storeDir, log)
			srvLog.onStorage = c.storage.serverLogLine
		}
		c.access = newClientAccess(cfg.SubjectPrefix)
		ns, err := startServer(cfg, storeDir, jsOn, srvLog, c.access)
		if err != nil {
			return nil, err
		}
		c.server, c.Embedded = ns, true
		if jsOn && ns.JetStreamConfig() == nil {
			c.shutdownServer()
			return nil, errors.New("embedded NATS server: JetStream did not start (see the component=nats-server errors in the log)")
		}
		c.ClientURL = ns.ClientURL()
		// The worker's own connections log in as the worker, in process:
		// the password never leaves this process's memory.
		opts = append(opts, nats.InProcessServer(ns), nats.UserInfo(WorkerUser, c.access.workerPassword))
		log.Info("embedded NATS server started", "url", c.ClientURL, "jetstream", jsOn, "store_dir", storeDir)
	} else {
		c.ClientURL = cfg.URL
		auth, err := ClientAuth(cfg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, auth...)
	}
	c.dial, c.jsOn = opts, jsOn
	nc, err := nats.Connect(c.ClientURL, opts...)
	if err != nil {
		c.shutdownServer()
		var ne net.Error
		if errors.Is(err, nats.ErrNoServers) || errors.As(err, &ne) {
			return nil, fmt.Errorf("connect to NATS at %s: %w (%w)", c.ClientURL, err, ErrUnreachable)
		}
		return nil, fmt.Errorf("connect to NATS at %s: %w", c.ClientURL, err)
	}
	c.NC = nc
	if jsOn {
		c.JS, err = jetstream.New(nc)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("JetStream on %s: %w", c.ClientURL, err)
		}
		if c.storage != nil {
			c.storage.start(c.server, c.reconnectAfterJetStreamRestart)
		}
	} else {
		log.Warn("core NATS mode (nats.jetstream: false): messages are delivered at most once; a message arriving while the worker is down or busy crashing is lost")
	}
	return c, nil
}

func (c *Conn) clientOptions() []nats.Option {
	return []nats.Option{
		nats.Name("agent-worker"),
		// Replies to the worker's requests and reads go where publishers
		// (who may read _INBOX.>) cannot subscribe.
		nats.CustomInboxPrefix(InboxPrefix),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(false),
		nats.CustomReconnectDelay(func(attempts int) time.Duration {
			// Exponential from 100ms to 5s, with up to 20% jitter.
			d := min(100*time.Millisecond<<min(attempts, 6), 5*time.Second)
			return d + time.Duration(rand.Int64N(int64(d/5)+1))
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if c.closing.Load() || c.reconnecting.Swap(false) {
				return
			}
			c.log.Warn("NATS connection lost; reconnecting", "error", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			c.reconnecting.Store(false)
			c.log.Info("NATS connection restored", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			c.log.Warn("NATS async error", "subject", subject, "error", err)
		}),
	}
}

// startServer runs nats-server in this process, logging to logger.
func startServer(cfg config.NATS, storeDir string, jetStream bool, logger server.Logger, access *clientAccess) (*server.Server, error) {
	listen := cfg.Listen
	host, port := "127.0.0.1", -1
	if listen != "-1" && listen != "" {
		h, p, err := net.SplitHostPort(listen)
		if err != nil {
			return nil, fmt.Errorf("nats.listen %q: want host:port or -1: %w", listen, err)
		}
		if port, err = strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("nats.listen %q: bad port: %w", listen, err)
		}
		host = h
	}
	if port > 0 {
		if err := probeListen(host, port); err != nil {
			return nil, listenError(listen, err)
		}
	}
	if err := os.MkdirAll(storeDir, 0o750); err != nil {
		return nil, fmt.Errorf("data dir for the embedded NATS server: %w", err)
	}
	removeStaleProbes(storeDir)
	opts := &server.Options{
		ServerName: "agent-worker",
		Host:       host,
		Port:       port,
		JetStream:  jetStream,
		StoreDir:   storeDir,
		NoSigs:     true,
		// NoLog only keeps the server from ever building a logger of its
		// own on stderr (ConfigureLogger); it logs to the one set below.
		NoLog: true,
	}
	if err := serverAuth(opts, cfg, access); err != nil {
		return nil, err
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS server: %w", err)
	}
	// Debug and trace off: the server does not even format those lines.
	ns.SetLoggerV2(logger, false, false, false)
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		// The port was free a moment ago; the server logged why it could
		// not listen (or what else held it up).
		return nil, errors.New("embedded NATS server did not become ready within 10s (see the component=nats-server errors in the log)")
	}
	return ns, nil
}

// probeListen listens on host:port and closes at once: the OS's answer
// before the server, which only logs a failure to listen, tries the same.
func probeListen(host string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}

// Connect's errors that say what kind of trouble it met, for errors.Is.
var (
	// ErrListen: the embedded server cannot listen on nats.listen (the
	// port is taken, the host has no such address, not permitted).
	ErrListen = errors.New("embedded NATS server cannot listen")
	// ErrUnreachable: no NATS server at nats.url answered.
	ErrUnreachable = errors.New("NATS unreachable")
)

// listenError says why the embedded server cannot listen on nats.listen,
// from probeListen's error: "in use" only when the port is taken
// (EADDRINUSE); otherwise what the OS said ("cannot assign requested
// address", "permission denied").
func listenError(listen string, err error) error {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("%w: nats.listen %s is already in use (another agent-worker or nats-server?); set nats.listen to a free port, or -1 for a random one", ErrListen, listen)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Errorf("%w on nats.listen %s: %w; this host has no such address: set nats.listen to one of its addresses (e.g. 127.0.0.1:4222)", ErrListen, listen, err)
	default:
		return fmt.Errorf("%w on nats.listen %s: %w", ErrListen, listen, err)
	}
}

// Close drains the connection (pending publishes are flushed) and stops
// the embedded server, if any.
func (c *Conn) Close() {
	c.closing.Store(true)
	if c.storage != nil {
		c.storage.close() // before the drain: it may restart JetStream or reconnect
	}
	if c.NC != nil {
		done := make(chan struct{})
		c.NC.SetClosedHandler(func(*nats.Conn) { close(done) })
		if err := c.NC.Drain(); err == nil {
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				c.NC.Close()
			}
		} else {
			c.NC.Close()
		}
	}
	c.shutdownServer()
}

// reconnectAfterJetStreamRestart makes the connection reconnect (at once,
// to the embedded server) after the storage monitor restarted JetStream.
// The restart drops the consumers' pending pull requests without a word
// to the client, and nats.go's Consume would notice only when two
// heartbeats are missed (about 30s by default); after a reconnect it
// pulls again at once. Subscriptions are restored, and publishes made
// meanwhile are buffered and sent, by the reconnect.
func (c *Conn) reconnectAfterJetStreamRestart() {
	c.reconnecting.Store(true)
	if err := c.NC.ForceReconnect(); err != nil {
		c.reconnecting.Store(false)
		c.log.Warn("NATS reconnect after the JetStream restart failed; consumers resume when they miss heartbeats", "error", err)
	}
}

func (c *Conn) shutdownServer() {
	if c.storage != nil {
		c.storage.close()
	}
	if c.server != nil {
		c.server.Shutdown()
		c.server.WaitForShutdown()
	}
}

// Dial opens another connection to the worker's NATS server, with the
// same credentials, named name: for work that must never queue behind the
// worker's bulk traffic on NC (a burst of publishes, thousands of store
// reads), as the lease renewals must not. Its JetStream is nil in core
// NATS mode. It reconnects forever, as NC does, quietly; the caller closes
// it before Close.
func (c *Conn) Dial(name string) (*nats.Conn, jetstream.JetStream, error) {
	opts := append(append([]nats.Option(nil), c.dial...), nats.Name(name),
		nats.DisconnectErrHandler(nil), nats.ReconnectHandler(nil))
	nc, err := nats.Connect(c.ClientURL, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to NATS at %s (%s): %w", c.ClientURL, name, err)
	}
	if !c.jsOn {
		return nc, nil, nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("JetStream on %s (%s): %w", c.ClientURL, name, err)
	}
	return nc, js, nil
}

// Ready reports whether the connection is usable, for readiness checks.
func (c *Conn) Ready() error {
	if !c.NC.IsConnected() {
		return fmt.Errorf("NATS: %s", c.NC.Status())
	}
	return nil
}
