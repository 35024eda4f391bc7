package config

import (
	"net"
	pathpkg "path"
	"strconv"
	"strings"
)

// apiTokens checks api.tokens: each a known role, exactly one source for
// its value, and agent scopes that match a configured agent.
func (v *validator) apiTokens(c *Config) {
	var root path
	for i, t := range c.API.Tokens {
		p := root.key("api", "tokens").index(i)
		v.oneOf(p.key("role"), t.Role, tokenRoles)
		if (t.ValueEnv == "") == (t.ValueFile == "") {
			v.at(p, "needs exactly one of value_env, value_file")
		}
		for j, pat := range t.Agents {
			v.agentPattern(c, p.key("agents").index(j), pat)
		}
	}
}

// listeners checks the API's request bounds and both listen addresses,
// and refuses either server reachable beyond loopback without
// authentication.
func (v *validator) listeners(c *Config) {
	var root path
	v.atLeastOne(root.key("api", "alertmanager_max_bytes"), c.API.AlertmanagerMaxBytes)
	v.inflight(root.key("api", "max_inflight_bytes"), c.API)
	apiOK := v.listen(root.key("api", "listen"), c.API.Listen, false)
	natsOK := c.NATS.URL != "" || v.listen(root.key("nats", "listen"), c.NATS.Listen, true)
	if apiOK && len(c.API.Tokens) == 0 && !IsLoopback(c.API.Listen) {
		v.at(root.key("api", "listen"), "%q is reachable beyond loopback and api.tokens is empty: anyone who can reach it could pause agents and add budget; add a token to api.tokens or listen on 127.0.0.1", c.API.Listen)
	}
	if natsOK && c.NATS.URL == "" && !c.NATS.EmbeddedOnLoopback() && !c.NATS.Authenticated() {
		v.at(root.key("nats", "listen"), "the embedded NATS server on %q is reachable beyond loopback without authentication: anyone who can reach it could publish to inboxes, pause agents and read the state store; set nats.token_env or nats.token_file (or nats.user with password_env/password_file, or nats.nkey_file), or listen on 127.0.0.1", c.NATS.Listen)
	}
}

// agentPattern checks a token's agent scope entry: a glob (path.Match
// syntax) or a configured agent's name.
func (v *validator) agentPattern(c *Config, p path, pat string) {
	if _, err := pathpkg.Match(pat, ""); err != nil {
		v.at(p, "bad glob %q: %v", pat, err)
		return
	}
	for _, a := range c.Agents {
		if ok, _ := pathpkg.Match(pat, a.Name); ok {
			return
		}
	}
	v.at(p, "%q matches no configured agent", pat)
}

// IsLoopback reports whether a host:port listen address is reachable only
// from this machine: a loopback IP or "localhost". An empty host, 0.0.0.0
// or [::] listens everywhere.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 { // IPv6 zone
		host = host[:i]
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// listen checks a listen address: host:port with a port in 0..65535 (0:
// any free port), or "-1" where random is allowed. It reports whether
// the address is well formed.
func (v *validator) listen(p path, addr string, random bool) bool {
	if random && addr == "-1" {
		return true
	}
	want := "host:port (e.g. 127.0.0.1:8080)"
	if random {
		want += " or -1 for a random port"
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.at(p, "want %s; got %q", want, addr)
		return false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.at(p, "bad port %q: want %s", port, want)
		return false
	}
	return true
}

// inflight checks api.max_inflight_bytes against the body limits: below
// the largest, a request the limits allow could never be admitted.
func (v *validator) inflight(p path, a API) {
	switch {
	case a.MaxInflightBytes < 1:
		v.atLeastOne(p, a.MaxInflightBytes)
	case a.MaxInflightBytes < a.AlertmanagerMaxBytes:
		v.at(p, "must be at least api.alertmanager_max_bytes (%d), or no Alertmanager notification that large could ever be admitted; got %d", a.AlertmanagerMaxBytes, a.MaxInflightBytes)
	case a.MaxInflightBytes < MaxAPIBodyBytes:
		v.at(p, "must be at least %d, the body limit of the other API routes, or no request that large could ever be admitted; got %d", MaxAPIBodyBytes, a.MaxInflightBytes)
	}
}
