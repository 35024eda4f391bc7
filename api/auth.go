package api

import (
	"net/http"
	"strings"

	"github.com/agent-worker/agent-worker/access"
)

// caller is who made a request (package access): its name is the token's,
// or "anonymous" on an open path and on a server without tokens.
type caller = access.Caller

// anonymous is the caller on an open path, and on a server without tokens
// (loopback only): everything is allowed.
var anonymous = access.Anonymous

// authenticate finds the caller. Open paths and a server without tokens
// let everyone in; a client throttled after failed authentications
// (throttle.go) is answered 429 without its credential being looked at;
// otherwise the request needs "Authorization: Bearer <token>" matching a
// token of the set in force, or, without that header, a valid session
// cookie (authenticateSession, which also guards writes against
// forgery), or it is answered 401 (a browser asking for the page gets
// the login form). Each refusal goes through authFailed: counted,
// throttled when a credential was presented, logged at most once a
// client a minute.
// set is the token set in force, read once by serveHTTP, so a request
// is checked against one set even while SetTokens swaps it.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, set *access.Set) (caller, bool) {
	if s.open[r.URL.Path] {
		return anonymous, true
	}
	if set.Empty() {
		return set.Anonymous(), true
	}
	if s.refuseThrottled(w, r, asksForPage(r)) { // 429, unchecked (throttle.go)
		return caller{}, false
	}
	header := r.Header.Get("Authorization")
	if header == "" {
		if who, ok, done := s.authenticateSession(w, r, set); done { // a session cookie (session.go)
			return who, ok
		}
	}
	presented, ok := access.Bearer(header)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agent-worker"`)
		if !s.offerLogin(w, r, http.StatusUnauthorized, "") { // a browser asking for the page (login.go)
			fail(w, r, http.StatusUnauthorized, "missing bearer token: send Authorization: Bearer <token>")
		}
		kind, why, msg := refusedMissing, "no credential", "api request without a token"
		if header != "" {
			kind, why, msg = refusedCredential, "an Authorization header that is not a bearer token", "api request with an Authorization that is not a bearer token"
		}
		s.authFailed(r, kind, why, msg, "method", logSafe(r.Method), "path", logSafe(r.URL.Path), "user_agent", logSafe(r.UserAgent()))
		return caller{}, false
	}
	who, ok := set.Authenticate(presented)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agent-worker", error="invalid_token"`)
		fail(w, r, http.StatusUnauthorized, "invalid bearer token")
		s.authFailed(r, refusedCredential, "invalid bearer token", "api request with an invalid token",
			"method", logSafe(r.Method), "path", logSafe(r.URL.Path), "user_agent", logSafe(r.UserAgent()))
		return caller{}, false
	}
	return who, true
}

// scope describes what a role may do over HTTP, for error messages.
func scope(r Role) string {
	switch r {
	case RoleRead:
		return "which may only read (GET)"
	case RoleIngest:
		return "which may only queue messages (POST /v1/agents/{name}/messages) Alertmanager notifications (POST /v1/alertmanager/{name}) and webhooks (POST /v1/webhooks/{name})"
	}
	return "which may do everything"
}

// authorise answers 403 unless who's role allows the route pattern; it
// reports whether the request may go on.
func (s *Server) authorise(w http.ResponseWriter, r *http.Request, who caller, pattern string) bool {
	rt, ok := s.table[pattern]
	need := rt.need
	if !ok || need.Allows(who.Role) {
		return true // !ok: not a route of ours (a redirect to a cleaned path)
	}
	fail(w, r, http.StatusForbidden, "token %q has role %q, %s; %s needs role %s", who.Name, who.Role, scope(who.Role), pattern, need.Roles())
	return false
}

// forbidAgent answers 403: agent is outside who's agents.
func forbidAgent(w http.ResponseWriter, r *http.Request, who caller, agent string) {
	fail(w, r, http.StatusForbidden, "token %q may not act on agent %q (its agents: %s)", who.Name, agent, strings.Join(who.Agents, ", "))
}
