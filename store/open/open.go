// Package open opens the state store that store.url names: the memory
// store, a NATS KV bucket on a JetStream the caller is connected to, or
// Redis with store.tls's client TLS. It also hides the password in a
// store URL, for logs and banners. It must not connect to NATS, retry,
// wrap, count or close the store it opens, nor decide what a failure
// means for the process: a wrong configuration is marked ErrConfig and
// the caller classes it.
package open

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
	"github.com/agent-worker/agent-worker/store/natskv"
	"github.com/agent-worker/agent-worker/store/redisstore"
)

// ErrConfig marks the errors of Store that the configuration causes
// (store.url, store.tls): fixing the file fixes them.
var ErrConfig = errors.New("configuration")

// Store opens the store cfg names; nats:// buckets keep replicas copies
// (nats.replicas) on js, which is nil in core NATS mode.
func Store(ctx context.Context, cfg config.Store, replicas int, js jetstream.JetStream, log *slog.Logger) (store.Store, error) {
	raw := cfg.URL
	scheme, rest, _ := strings.Cut(raw, "://")
	switch scheme {
	case "memory":
		log.Warn("state store is memory://: spend, halts, pauses and history do not survive a restart")
		return memstore.New(nil), nil
	case "nats":
		if js == nil {
			return nil, fmt.Errorf("%w: store.url nats:// needs JetStream (nats.jetstream: true)", ErrConfig)
		}
		return natskv.Open(ctx, js, natskv.Options{Bucket: strings.Trim(rest, "/"), Replicas: replicas, Log: log})
	case "redis", "rediss", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster":
		tlsCfg, err := tlsConfig(cfg.TLS)
		if err != nil {
			return nil, fmt.Errorf("%w: store.tls: %w", ErrConfig, err)
		}
		s, err := redisstore.Open(ctx, raw, redisstore.Options{PasswordEnv: cfg.PasswordEnv,
			SentinelPasswordEnv: cfg.SentinelPasswordEnv, TLS: tlsCfg, Log: log})
		if err != nil {
			return nil, err
		}
		log.Info("state store is Redis", "url", Redact(raw))
		return s, nil
	}
	return nil, fmt.Errorf("%w: store.url %q: unknown scheme %q (want nats, redis, rediss, redis+sentinel, redis+cluster or memory)", ErrConfig, Redact(raw), scheme)
}

// tlsConfig builds a client TLS config from files; nil when none is set.
func tlsConfig(t config.TLS) (*tls.Config, error) {
	if t.CAFile == "" && t.CertFile == "" && t.KeyFile == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s holds no PEM certificate", t.CAFile)
		}
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// Redact hides a password in a URL (also in multi-host Redis URLs that
// net/url cannot parse).
func Redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	at := strings.LastIndex(rest, "@")
	if slash := strings.Index(rest, "/"); slash >= 0 && slash < at {
		at = strings.LastIndex(rest[:slash], "@")
	}
	if at < 0 {
		return raw
	}
	user := rest[:at]
	if name, _, hasPass := strings.Cut(user, ":"); hasPass {
		user = name + ":xxxxx"
	}
	return scheme + "://" + user + rest[at:]
}

// StateBucket is the JetStream KV bucket that holds the state for a
// nats:// store URL ("agent-worker-state" by default), or "" for a store
// that is not in NATS.
func StateBucket(url string) string {
	scheme, rest, _ := strings.Cut(url, "://")
	if scheme != "nats" {
		return ""
	}
	prefix := strings.Trim(rest, "/")
	if prefix == "" {
		prefix = natskv.DefaultBucket
	}
	return prefix + "-state"
}
