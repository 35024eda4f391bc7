package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	pathpkg "path"
	"slices"
	"strings"
)

// credential is a configured token, kept as a digest: comparing digests
// of equal length keeps the comparison constant-time whatever the length
// of the presented token.
type credential struct {
	name   string
	role   Role
	agents []string // names or path.Match globs; empty: every agent
	digest [sha256.Size]byte
}

// tokenSet is the tokens in force. It is replaced whole (SetTokens) and
// never changed in place; changed is closed when it is replaced, so event
// streams can check whether their token is still valid.
type tokenSet struct {
	creds   []credential
	changed chan struct{}
}

func newTokenSet(creds []credential) *tokenSet {
	return &tokenSet{creds: creds, changed: make(chan struct{})}
}

// caller is who made a request.
type caller struct {
	name   string
	role   Role
	agents []string // empty: every agent
	// set is the token set the caller was authenticated against, nil on
	// an open path; cred is its token, nil when the set had none.
	set  *tokenSet
	cred *credential
}

// anonymous is the caller on an open path, and on a server without tokens
// (loopback only): everything is allowed.
var anonymous = caller{name: "anonymous", role: RoleOperate}

// mayAccess reports whether the caller may see or act on agent. The zero
// caller (no role) may not.
func (c caller) mayAccess(agent string) bool {
	return c.role != "" && agentInScope(c.agents, agent)
}

// agentInScope reports whether agent matches one of patterns (names or
// path.Match globs); every agent does when there are none.
func agentInScope(patterns []string, agent string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, _ := pathpkg.Match(p, agent); ok { // patterns are checked by credentials
			return true
		}
	}
	return false
}

// validIn reports whether the caller's authentication still holds under
// set: an open path always; a server without tokens while it still has
// none; a token while set holds the same token with the same name, role
// and agents.
func (c caller) validIn(set *tokenSet) bool {
	switch {
	case c.set == nil:
		return true
	case c.cred == nil:
		return len(set.creds) == 0
	}
	for _, t := range set.creds {
		if t.digest == c.cred.digest && t.name == c.cred.name && t.role == c.cred.role && slices.Equal(t.agents, c.cred.agents) {
			return true
		}
	}
	return false
}

// credentials checks tokens and digests them: every token needs a value
// and a known role, and its agents must be names or valid globs.
func credentials(tokens []Token) ([]credential, error) {
	out := make([]credential, 0, len(tokens))
	for i, t := range tokens {
		name := t.Name
		if name == "" {
			name = fmt.Sprintf("tokens[%d]", i)
		}
		switch {
		case t.Value == "":
			return nil, fmt.Errorf("%w: api.tokens[%d] (%s) has no value", ErrBadToken, i, name)
		case t.Role != RoleRead && t.Role != RoleIngest && t.Role != RoleOperate:
			return nil, fmt.Errorf("%w: api.tokens[%d] (%s) has role %q; want %q, %q or %q", ErrBadToken, i, name, t.Role, RoleRead, RoleIngest, RoleOperate)
		}
		for j, p := range t.Agents {
			if p == "" {
				return nil, fmt.Errorf("%w: api.tokens[%d] (%s) agents[%d] is empty; want an agent name or a glob such as \"payments-*\"", ErrBadToken, i, name, j)
			}
			if _, err := pathpkg.Match(p, ""); err != nil {
				return nil, fmt.Errorf("%w: api.tokens[%d] (%s) agents[%d] %q is not a valid glob: %v", ErrBadToken, i, name, j, p, err)
			}
		}
		out = append(out, credential{name: name, role: t.Role, agents: slices.Clone(t.Agents), digest: sha256.Sum256([]byte(t.Value))})
	}
	return out, nil
}

// authenticate finds the caller. Open paths and a server without tokens
// let everyone in; otherwise the request needs "Authorization: Bearer
// <token>" matching a token of the set in force, or it is answered 401.
// The set is read once, so a request is checked against one set even
// while SetTokens swaps it.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (caller, bool) {
	if s.open[r.URL.Path] {
		return anonymous, true
	}
	set := s.tokens.Load()
	if len(set.creds) == 0 {
		who := anonymous
		who.set = set
		return who, true
	}
	presented, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agent-worker"`)
		fail(w, r, http.StatusUnauthorized, "missing bearer token: send Authorization: Bearer <token>")
		s.log.Warn("api request without a token", "method", logSafe(r.Method), "path", logSafe(r.URL.Path),
			"remote", logSafe(r.RemoteAddr), "user_agent", logSafe(r.UserAgent()))
		return caller{}, false
	}
	digest := sha256.Sum256([]byte(presented))
	var found *credential
	// Every token is compared, match or not, so the time taken does not
	// say which one matched.
	for i := range set.creds {
		if subtle.ConstantTimeCompare(digest[:], set.creds[i].digest[:]) == 1 && found == nil {
			found = &set.creds[i]
		}
	}
	if found == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agent-worker", error="invalid_token"`)
		fail(w, r, http.StatusUnauthorized, "invalid bearer token")
		s.log.Warn("api request with an invalid token", "method", logSafe(r.Method), "path", logSafe(r.URL.Path),
			"remote", logSafe(r.RemoteAddr), "user_agent", logSafe(r.UserAgent()))
		return caller{}, false
	}
	return caller{name: found.name, role: found.role, agents: found.agents, set: set, cred: found}, true
}

// bearer extracts the token of an Authorization header.
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// access is what a route needs of a caller's role.
type access int

const (
	// accessRead: read or operate (GET routes).
	accessRead access = iota
	// accessIngest: ingest or operate (queueing messages).
	accessIngest
	// accessOperate: operate only (every other write).
	accessOperate
)

// allows reports whether role may use a route that needs a.
func (a access) allows(role Role) bool {
	switch role {
	case RoleOperate:
		return true
	case RoleRead:
		return a == accessRead
	case RoleIngest:
		return a == accessIngest
	}
	return false
}

// roles names the roles that a allows, for error messages.
func (a access) roles() string {
	switch a {
	case accessRead:
		return fmt.Sprintf("%q or %q", RoleRead, RoleOperate)
	case accessIngest:
		return fmt.Sprintf("%q or %q", RoleIngest, RoleOperate)
	}
	return fmt.Sprintf("%q", RoleOperate)
}

// scope describes what a role may do, for error messages.
func (r Role) scope() string {
	switch r {
	case RoleRead:
		return "which may only read (GET)"
	case RoleIngest:
		return "which may only queue messages (POST /v1/agents/{name}/messages) and Alertmanager notifications (POST /v1/alertmanager/{name})"
	}
	return "which may do everything"
}

// authorise answers 403 unless who's role allows the route pattern; it
// reports whether the request may go on.
func (s *Server) authorise(w http.ResponseWriter, r *http.Request, who caller, pattern string) bool {
	need, ok := s.needs[pattern]
	if !ok || need.allows(who.role) {
		return true // !ok: not a route of ours (a redirect to a cleaned path)
	}
	fail(w, r, http.StatusForbidden, "token %q has role %q, %s; %s needs role %s", who.name, who.role, who.role.scope(), pattern, need.roles())
	return false
}

// forbidAgent answers 403: agent is outside who's agents.
func forbidAgent(w http.ResponseWriter, r *http.Request, who caller, agent string) {
	fail(w, r, http.StatusForbidden, "token %q may not act on agent %q (its agents: %s)", who.name, agent, strings.Join(who.agents, ", "))
}
