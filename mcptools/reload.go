package mcptools

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"

	"github.com/agent-worker/agent-worker/config"
)

// Plan is a reload of the MCP servers: the servers a new mcp_servers
// adds, removes and changes (by name, sorted), with the new connections
// prepared but not started. The worker's reload applies it in two steps
// around the change of its agents:
//
//   - Connect, before the agents change: added servers and the new
//     connections of changed ones are started and put in place by name,
//     so that every tool set offers them from its next model call on.
//   - Retire, once the agents changed: removed servers take no new call
//     and are disconnected when their running calls have ended.
//
// A server is changed when any of its keys differs (url, command, env,
// headers, timeout, tool_prefix, ...). The values of its headers_env,
// headers_file and inherit_env are read when a Plan is made for an added
// or changed server, as Start reads them; an unchanged server keeps its
// connection and the values it was made with.
//
// A Plan that is dropped before Connect changes nothing and holds
// nothing. Plans of one Servers must be applied one at a time, in the
// order they were made.
type Plan struct {
	Added, Removed, Changed []string

	s     *Servers
	fresh map[string]*server // added and changed: not started yet
}

// Empty reports whether the plan changes no server.
func (p *Plan) Empty() bool {
	return len(p.Added) == 0 && len(p.Removed) == 0 && len(p.Changed) == 0
}

// Plan compares the servers in force with next and prepares the new
// connections. It fails, changing nothing, when a header's variable or
// file, or an inherit_env variable, of an added or changed server cannot
// be read (each such server is named in the error).
func (s *Servers) Plan(next map[string]config.MCPServer) (*Plan, error) {
	cur := s.all()
	p := &Plan{s: s, fresh: map[string]*server{}}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(next)) {
		old, ok := cur[name]
		if ok && reflect.DeepEqual(old.cfg, next[name]) {
			continue
		}
		srv, err := newServer(name, next[name], s.opts)
		if err != nil {
			errs = append(errs, fmt.Errorf("mcp_servers.%s: %w", name, err))
			continue
		}
		p.fresh[name] = srv
		if ok {
			p.Changed = append(p.Changed, name)
		} else {
			p.Added = append(p.Added, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cur)) {
		if _, ok := next[name]; !ok {
			p.Removed = append(p.Removed, name)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// Connect starts the plan's new connections, waits until each has made
// its first attempt to connect (each attempt is bounded by its server's
// timeout; ctx bounds the whole wait), and then puts them in place of
// the servers of the same name. It returns the servers that were not up
// by then: they are put in place all the same and keep connecting in the
// background, their tools answering "server unavailable" until they are
// up, as at start.
//
// The old connection of a changed server takes no call after the swap:
// a call through a tool built on it (a turn that listed its tools before
// the swap) goes to the new connection. Its running calls end as they
// would have, and then it is disconnected.
func (p *Plan) Connect(ctx context.Context) (late []string) {
	if len(p.fresh) == 0 {
		return nil
	}
	s := p.s
	s.reload.Lock()
	if s.ctx.Err() != nil { // closed
		s.reload.Unlock()
		return slices.Sorted(maps.Keys(p.fresh))
	}
	for _, srv := range p.fresh {
		s.launch(srv)
	}
	s.reload.Unlock()

	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, srv := range p.fresh {
		wg.Go(func() {
			select {
			case <-srv.tried:
			case <-ctx.Done():
			case <-s.ctx.Done():
			}
			if !srv.status().Up {
				mu.Lock()
				late = append(late, name)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(late)

	s.reload.Lock()
	defer s.reload.Unlock()
	if s.ctx.Err() != nil { // closed meanwhile: the new loops ended with it
		return late
	}
	set := maps.Clone(s.all())
	if set == nil {
		set = map[string]*server{}
	}
	for _, name := range slices.Sorted(maps.Keys(p.fresh)) {
		srv := p.fresh[name]
		if old := set[name]; old != nil {
			s.retire(old, srv, "replaced by a config reload")
			srv.log.Info("MCP server changed by a config reload: calls go to the new connection; the old one closes once its running calls end", "up", srv.status().Up)
		} else {
			srv.log.Info("MCP server added by a config reload: its tools are offered to the agents granted it from their next model call", "up", srv.status().Up)
		}
		set[name] = srv
	}
	s.servers.Store(&set)
	for _, name := range late {
		p.fresh[name].log.Warn("MCP server not up after the config reload; its tools answer with an error until it is, and the worker keeps connecting", "error", p.fresh[name].lastErr())
	}
	return late
}

// Retire takes the plan's removed servers out of the set: a call through
// a tool built on one of them (by a turn that listed its tools before)
// is answered "server unavailable: removed by a config reload"; its
// running calls end as they would have, and then it is disconnected (a
// command server stopped). Call it after the agents granted them have
// their new tools: config validation makes every agent granted a removed
// server change its grants in the same reload.
func (p *Plan) Retire() {
	if len(p.Removed) == 0 {
		return
	}
	s := p.s
	s.reload.Lock()
	defer s.reload.Unlock()
	if s.ctx.Err() != nil {
		return
	}
	set := maps.Clone(s.all())
	for _, name := range p.Removed {
		old := set[name]
		if old == nil {
			continue
		}
		delete(set, name)
		s.retire(old, nil, "removed by a config reload")
		old.log.Info("MCP server removed by a config reload: it takes no new call and is disconnected once its running calls end")
	}
	s.servers.Store(&set)
}

// launch starts srv's run loop, which ends with its stop or Close. Call
// it under s.reload, or before s is shared.
func (s *Servers) launch(srv *server) {
	ctx, stop := context.WithCancel(s.ctx)
	srv.stop = stop
	if s.opts.OnState != nil {
		s.opts.OnState(srv.name, false)
	}
	s.wg.Go(func() {
		defer stop()
		srv.run(ctx)
	})
}

// retire marks old as no longer the server of its name (next, when not
// nil, is its replacement) and disconnects it once its running calls
// have ended (or the worker closes). Call it under s.reload.
func (s *Servers) retire(old, next *server, why string) {
	old.mu.Lock()
	old.retired = fmt.Errorf("%w: %q was %s", ErrUnavailable, old.name, why)
	old.next = next
	old.idle = make(chan struct{})
	if old.calls == 0 {
		close(old.idle)
	}
	idle, running := old.idle, old.calls
	old.mu.Unlock()
	if running > 0 {
		old.log.Info("MCP server connection retired; waiting for its running calls to end", "calls", running, "why", why)
	}
	s.wg.Go(func() {
		select {
		case <-idle:
		case <-s.ctx.Done():
		}
		old.stop() // the run loop closes the session (a command server stops)
		old.log.Info("MCP server connection closed", "why", why)
	})
}

// enter admits a call on srv: nil, nil when srv takes it (leave must
// follow); its replacement when a reload replaced srv; the error a
// removed server answers with.
func (srv *server) enter() (*server, error) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.retired != nil {
		if srv.next != nil {
			return srv.next, nil
		}
		return nil, srv.retired
	}
	srv.calls++
	return nil, nil
}

// leave ends a call enter admitted.
func (srv *server) leave() {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.calls--
	if srv.retired != nil && srv.calls == 0 {
		close(srv.idle)
	}
}

// all is the set of servers in force; callers must not modify it.
func (s *Servers) all() map[string]*server {
	if m := s.servers.Load(); m != nil {
		return *m
	}
	return nil
}

// server is the server of that name in force, or nil.
func (s *Servers) server(name string) *server { return s.all()[name] }
