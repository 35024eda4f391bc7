package api

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/agent-worker/agent-worker/access"
)

// SessionLifetime is how long a browser session of the status page lasts
// after its login (the cookie's Max-Age, and the expiry its signature
// covers). There is no sliding renewal: after it, the user logs in again.
// It bounds how long a copied cookie stays useful when its token is
// neither removed nor rotated.
const SessionLifetime = 12 * time.Hour

// SessionCookie is the name of the session cookie POST /login sets.
const SessionCookie = "agent_worker_session"

// authenticateSession authenticates a request that sent no Authorization
// header by its session cookie (access.Set.Resume: the token's name, an
// expiry and an HMAC keyed by the token's value, so any replica can check
// it and rotating the value ends it). done is false when there is no
// cookie: the request is then refused as one without a token. Otherwise
// the request is answered here unless ok:
//
//   - a session that does not verify, has expired, or whose token may no
//     longer read is 401 (the login form for a browser asking for the
//     page, with the reason; JSON otherwise), and its cookie is cleared;
//   - a write must pass checkCSRF (403 JSON otherwise).
//
// Every refusal is logged; the Observer counts it by route and status. A
// refused session is a failed authentication (authFailed: it counts
// towards the client's throttle); a missing CSRF token is not.
func (s *Server) authenticateSession(w http.ResponseWriter, r *http.Request, set *access.Set) (who caller, ok, done bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return caller{}, false, false
	}
	who, err = set.Resume(c.Value, s.clock.Now())
	if err == nil && !access.Read.Allows(who.Role) {
		err = errSessionCannotRead
	}
	if err != nil {
		s.authFailed(r, refusedCredential, "session cookie refused: "+err.Error(), "api request with an invalid session",
			"method", logSafe(r.Method), "path", logSafe(r.URL.Path), "reason", err.Error(), "user_agent", logSafe(r.UserAgent()))
		clearSessionCookie(w, r)
		if !s.offerLogin(w, r, http.StatusUnauthorized, sessionEndedMessage(err)) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agent-worker"`)
			fail(w, r, http.StatusUnauthorized, "session cookie refused (%v): log in again at / or send Authorization: Bearer <token>", err)
		}
		return caller{}, false, true
	}
	record(r).session = c.Value
	if isWrite(r.Method) && !s.checkCSRF(w, r, who, c.Value) {
		return caller{}, false, true
	}
	return who, true, true
}

// errSessionCannotRead: the session's token is in force but its role no
// longer reads (changed to ingest), so the page is not for it.
var errSessionCannotRead = errors.New("session's token may no longer read")

// sessionEndedMessage tells the user on the login form why they must log
// in again.
func sessionEndedMessage(err error) string {
	switch {
	case errors.Is(err, access.ErrSessionExpired):
		return "Your session expired. Log in again."
	case errors.Is(err, errSessionCannotRead):
		return "Your session's token may no longer read the status page. Log in with a read or operate token."
	}
	return "Your session is no longer valid (its token was rotated or removed). Log in again."
}

// setSessionCookie sets the session cookie: HttpOnly (no script reads
// it), SameSite=Strict (no other site's page sends it), Path=/, Max-Age
// SessionLifetime (relative, so a browser's clock skew does not matter),
// and Secure when the request came over TLS.
func setSessionCookie(w http.ResponseWriter, r *http.Request, value string) {
	http.SetCookie(w, sessionCookieOf(r, value, int(SessionLifetime/time.Second)))
}

// clearSessionCookie tells the browser to drop the session cookie.
func clearSessionCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, sessionCookieOf(r, "", -1))
}

func sessionCookieOf(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: SessionCookie, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r),
	}
}

// overTLS reports whether the browser reached the API over TLS: the
// connection is TLS, or a TLS-terminating proxy in front says so
// (X-Forwarded-Proto: https). The API has no TLS settings of its own.
// Trusting the header can only add Secure, which a client forging it
// would deny itself.
func overTLS(r *http.Request) bool {
	first, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",") // the proxy nearest the browser
	return r.TLS != nil || strings.EqualFold(strings.TrimSpace(first), "https")
}
