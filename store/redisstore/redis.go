package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/agent-worker/agent-worker/store"
)

// DefaultPrefix starts every Redis key when Options.Prefix is empty.
const DefaultPrefix = "agent-worker:"

// Options configure Open. The zero value is usable.
type Options struct {
	// Prefix starts the name of every Redis key the store writes. Empty
	// means DefaultPrefix. Workers that share a prefix (and database)
	// share their state; give each deployment its own. A prefix with a
	// {hash tag} puts every key in one Cluster slot.
	Prefix string
	// PasswordEnv names an environment variable holding the password of
	// the Redis servers (on Sentinel: of the master and replicas), for a
	// URL without one. Empty: the password is the URL's, or none. Set, the
	// variable must be set and not empty, and the URL must not also carry
	// a password.
	PasswordEnv string
	// SentinelPasswordEnv names an environment variable holding the
	// password of the Sentinels themselves (their requirepass), which is
	// often not the master's. Empty: the Sentinels are reached without
	// AUTH. Only for redis+sentinel:// URLs.
	SentinelPasswordEnv string
	// TLS configures the TLS of rediss:// URLs (root CAs, a client
	// certificate). Nil means the system's roots. ServerName, if empty,
	// is each address's host name. Setting it for a non-TLS URL is an
	// error, so a forgotten "s" does not fall back to plain text.
	TLS *tls.Config
	// Log receives one line when the store opens (where, never a
	// password), and a warning when the server may evict keys. Nil
	// discards them.
	Log *slog.Logger
}

// Store is a store.Store over Redis. It is safe for concurrent use, by
// several goroutines and by several processes on the same prefix: every
// write is one atomic script on the server.
type Store struct {
	client redis.UniversalClient
	prefix string
	target target
	closed atomic.Bool
}

var _ store.Store = (*Store)(nil)

// Open connects to the Redis that url names, checks it answers (PING), and
// returns a Store whose keys all start with opts.Prefix.
//
// URL forms (user info and query are optional everywhere; a port defaults
// to 6379, a Sentinel's to 26379; IPv6 hosts go in brackets):
//
//	redis://[USER[:PASSWORD]@]HOST[:PORT][/DB][?QUERY]
//	    one server, database DB (default 0)
//	rediss://...
//	    the same over TLS
//	redis+sentinel://[USER[:PASSWORD]@]S1[:PORT][,S2[:PORT]...]/MASTER[/DB][?QUERY]
//	    the master that Sentinels S1, S2... monitor under the name MASTER
//	rediss+sentinel://...
//	    the same, TLS to the Sentinels and the servers
//	redis+cluster://[USER[:PASSWORD]@]N1[:PORT][,N2[:PORT]...][?QUERY]
//	    Redis Cluster with seed nodes N1, N2... (database 0 only)
//	rediss+cluster://...
//	    the same over TLS
//
// For example redis://redis.ops:6379/2, rediss://cache.example.com:6380,
// redis+sentinel://s1,s2,s3/mymaster/0, redis+cluster://n1:7000,n2:7000.
//
// USER and PASSWORD are percent-encoded (a password with "@", ":" or "/"
// needs %40, %3A, %2F) and authenticate to the Redis servers (ACL user, or
// the requirepass with no USER); on Sentinel they are the master's, and
// the Sentinels' own password comes from Options.SentinelPasswordEnv.
// Rather than writing a password in the URL, name an environment variable
// in Options.PasswordEnv. Passwords are never logged, and errors show the
// URL with its user info replaced by "***" and without its query.
//
// Query parameters: dial_timeout, read_timeout, write_timeout (Go
// durations: 5s, 500ms), pool_size (connections per node) and
// client_name (CLIENT SETNAME). Others are refused, as is a password in
// the query. Percent-encode an "@" in a query value (%40).
//
// The server must be Redis 5 or later (or a compatible server that runs
// Lua scripts with TIME and multi-field HSET, such as Valkey).
//
// The error of an unreachable or refusing server names it, "redis at
// host:port: ...", and wraps go-redis's; one that found no server to
// answer (refused, timed out) also matches store.ErrUnreachable. ctx
// bounds the connection and first PING.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	ropts, tg, err := parseURL(url, opts, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("redisstore: open: %w", err)
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if opts.Log != nil {
		// go-redis writes its own complaints (failed dials, pool trouble)
		// through one process-wide logger, in plain text on stderr by
		// default; send them to the worker's log instead.
		redis.SetLogger(clientLog{opts.Log})
	}
	client := redis.NewUniversalClient(ropts)
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		if cerr := ctx.Err(); cerr != nil {
			err = cerr
		}
		var ne net.Error
		if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("redisstore: open: %s: %w (%w)", tg, err, store.ErrUnreachable)
		}
		return nil, fmt.Errorf("redisstore: open: %s: %w", tg, err)
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log.Info("state store open", "store", "redis", "target", tg.String(), "db", tg.db, "tls", tg.tls, "prefix", prefix)
	if policy := evictionPolicy(ctx, client); policy != "" && policy != "noeviction" {
		log.Warn("redis may evict agent-worker's state (claims, leases, halts) under memory pressure; set maxmemory-policy noeviction",
			"store", "redis", "target", tg.String(), "maxmemory_policy", policy)
	}
	return &Store{client: client, prefix: prefix, target: tg}, nil
}

// evictionPolicy is the server's maxmemory-policy from INFO memory, or ""
// when it cannot tell (INFO refused or without it): a best-effort check
// for the log, never a reason to fail. On Cluster it asks one node.
func evictionPolicy(ctx context.Context, client redis.UniversalClient) string {
	info, err := client.Info(ctx, "memory").Result()
	if err != nil {
		return ""
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "maxmemory_policy:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Close closes the connections to Redis; every later call returns
// store.ErrClosed, and so do calls still running. Closing twice is not an
// error. Nothing needs flushing: every write was acknowledged by the server
// when it returned.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	if err := s.client.Close(); err != nil {
		return fmt.Errorf("redisstore: close %s: %w", s.target, err)
	}
	return nil
}

// stateKey is where a key lives: a hash of v (value), r (revision) and w
// (the last write's token).
func (s *Store) stateKey(key string) string { return s.prefix + "k:" + key }

// listKey is where a list lives, and listTokenKey the last Append's
// token. Their {hash tag} puts both in one Cluster slot, which the Append
// script needs; valid list names have no braces to break it.
func (s *Store) listKey(list string) string      { return s.prefix + "l:{" + list + "}" }
func (s *Store) listTokenKey(list string) string { return s.prefix + "l:{" + list + "}:w" }

// begin is every method's entry check: closed store, done context, bad key.
func (s *Store) begin(ctx context.Context, op, key string) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: %s %q: %w", op, key, err)
	}
	if !store.ValidKey(key) {
		return fmt.Errorf("redisstore: %s %q: %w", op, key, store.ErrInvalidKey)
	}
	return nil
}

// wrap says what was being done, and where. A closed store and a done
// context win over whatever error go-redis made of them, so callers can
// match store.ErrClosed, context.Canceled and context.DeadlineExceeded.
func (s *Store) wrap(ctx context.Context, op, key string, err error) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("redisstore: %s %q: %w", op, key, cerr)
	}
	return fmt.Errorf("redisstore: %s %q (%s): %w", op, key, s.target, err)
}

// clientLog hands go-redis's log lines to the worker's logger as
// warnings, tagged component=go-redis.
type clientLog struct{ log *slog.Logger }

func (l clientLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)), "component", "go-redis")
}
