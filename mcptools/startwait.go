package mcptools

import (
	"context"
	"maps"
	"sync"
	"time"
)

// How a turn's wait for a server's first connection ended
// (agent_worker_mcp_start_waits_total's outcome).
const (
	// WaitConnected: the first attempt connected; the turn has the
	// server's tools.
	WaitConnected = "connected"
	// WaitFailed: the first attempt failed; the server's tools answer
	// with an error until it is up, as for any server that is down.
	WaitFailed = "failed"
	// WaitTimeout: the server's timeout passed before the first attempt
	// ended; the turn goes on as with WaitFailed.
	WaitTimeout = "timeout"
	// WaitCancelled: the turn ended (interrupted, shut down) while it
	// waited.
	WaitCancelled = "cancelled"
)

// startWaits counts the waits of turns for servers' first connections,
// by server and outcome. Servers holds it, so a server that a reload
// replaces counts on.
type startWaits struct {
	mu sync.Mutex
	n  map[string]map[string]uint64
}

func (w *startWaits) add(server, outcome string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n = map[string]map[string]uint64{}
	}
	if w.n[server] == nil {
		w.n[server] = map[string]uint64{}
	}
	w.n[server][outcome]++
}

// StartWaits returns how many times a turn waited for a server's first
// connection, by server and outcome (WaitConnected, ...): for
// agent_worker_mcp_start_waits_total.
func (s *Servers) StartWaits() map[string]map[string]uint64 {
	s.starts.mu.Lock()
	defer s.starts.mu.Unlock()
	out := make(map[string]map[string]uint64, len(s.starts.n))
	for server, n := range s.starts.n {
		out[server] = maps.Clone(n)
	}
	return out
}

// awaitFirstAttempts holds the turn that asks for the tool set — before
// its first model call — while a server of the grants is still making its
// first connection attempt (at start, or after a reload added or changed
// it): until the attempt ends, connected or not, and at most the server's
// timeout from when the wait began, or until ctx ends. A server whose first
// attempt has ended never holds a turn: once down, its tools answer with
// an error, as before. Each wait is logged when it begins and when it
// ends, and counted by outcome.
func (t *toolset) awaitFirstAttempts(ctx context.Context) {
	began := time.Now()
	seen := map[*server]bool{}
	for _, g := range t.grants {
		srv := t.s.server(g.Server)
		if srv == nil || seen[srv] {
			continue
		}
		seen[srv] = true
		select {
		case <-srv.tried:
			continue
		default:
		}
		outcome := srv.awaitFirstAttempt(ctx, t.agent, srv.cfg.Timeout.D()-time.Since(began))
		t.s.starts.add(srv.name, outcome)
	}
}

// awaitFirstAttempt waits at most limit for srv's first connection
// attempt to end, for a turn of agent, and says how the wait ended.
func (srv *server) awaitFirstAttempt(ctx context.Context, agent string, limit time.Duration) string {
	began := time.Now()
	srv.log.Info("turn waits for the MCP server's first connection before its first model call", "agent", agent, "timeout", srv.cfg.Timeout.D())
	timer := time.NewTimer(max(limit, 0))
	defer timer.Stop()
	select {
	case <-srv.tried:
		if st := srv.status(); !st.Up {
			srv.log.Warn("MCP server's first connection failed; the waiting turn goes on, the server's tools answering with an error until it is up",
				"agent", agent, "waited", time.Since(began), "error", st.Error)
			return WaitFailed
		}
		srv.log.Info("MCP server connected; the waiting turn goes on", "agent", agent, "waited", time.Since(began))
		return WaitConnected
	case <-timer.C:
		srv.log.Warn("turn waited the MCP server's timeout for its first connection; it goes on, the server's tools answering with an error until it is up",
			"agent", agent, "waited", time.Since(began), "timeout", srv.cfg.Timeout.D())
		return WaitTimeout
	case <-ctx.Done():
		srv.log.Info("turn ended while it waited for the MCP server's first connection", "agent", agent, "waited", time.Since(began), "error", context.Cause(ctx))
		return WaitCancelled
	}
}
