package api

import (
	_ "embed"
	"errors"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agent-worker/agent-worker/access"
)

// The routes of the status page's login. They are served before
// authentication: the login is the authentication, and a logout needs
// none (it only clears the browser's cookie).
const (
	loginRoute  = "POST /login"
	logoutRoute = "POST /logout"
)

// loginMaxBytes bounds the login form's body: a token and little else.
const loginMaxBytes = 8 << 10

//go:embed login.html
var loginSource string

// loginPage is the login form. It shows a message and the session
// lifetime, never a token.
var loginPage = template.Must(template.New("login").Parse(loginSource))

// loginCSP lets the form post to this server and nothing else run or load.
const loginCSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"

// sessionRoutes are the login and logout routes. Their need only names
// them for Routes and the Observer: they are served before
// authentication (isSessionRoute), and have no action because serveHTTP
// logs no write for them.
func (s *Server) sessionRoutes() []route {
	return []route{
		readRoute(loginRoute, s.login),
		readRoute(logoutRoute, s.logout),
	}
}

// isSessionRoute reports whether pattern is served before authentication.
func isSessionRoute(pattern string) bool {
	return pattern == loginRoute || pattern == logoutRoute
}

// login serves POST /login, the form's "token" field: a token that may
// read (read or operate) gets a session cookie (setSessionCookie) and a
// 303 to the page; a wrong token gets the form again with 401 (a failed
// authentication: authFailed), an ingest token 403, a cross-origin post
// 403, each with a message and logged; a client throttled after failed
// authentications 429, its token not checked. A server without tokens
// has no login (404 JSON: the page needs none).
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	set := s.tokens.Load()
	if set.Empty() {
		fail(w, r, http.StatusNotFound, "this API has no tokens: the status page needs no login")
		return
	}
	if s.refuseThrottled(w, r, strings.Contains(r.Header.Get("Accept"), "text/html")) { // 429, unchecked (throttle.go)
		return
	}
	refuse := func(status int, message, logMsg string, attrs ...any) {
		record(r).result = message
		s.log.Warn(logMsg, append(attrs, "status", status, "remote", logSafe(r.RemoteAddr), "user_agent", logSafe(r.UserAgent()))...)
		s.loginForm(w, r, status, message)
	}
	if from, same := sameOrigin(r); !same {
		refuse(http.StatusForbidden, "Cross-origin login refused.", "api login refused", "result", logSafe("cross-origin: "+from))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, loginMaxBytes)
	if err := r.ParseForm(); err != nil {
		status := http.StatusBadRequest
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			status = http.StatusRequestEntityTooLarge
		}
		refuse(status, "The login form could not be read.", "api login refused", "result", logSafe(err.Error()))
		return
	}
	presented := strings.TrimSpace(r.PostForm.Get("token"))
	who, ok := set.Authenticate(presented)
	if !ok {
		message := "That token is not valid. Paste the value of a read or operate token."
		record(r).result = message
		kind := refusedCredential
		if presented == "" {
			kind = refusedMissing // nothing guessed
		}
		s.authFailed(r, kind, "invalid token in the login form", "api login with an invalid token",
			"status", http.StatusUnauthorized, "user_agent", logSafe(r.UserAgent()))
		s.loginForm(w, r, http.StatusUnauthorized, message)
		return
	}
	if !access.Read.Allows(who.Role) {
		refuse(http.StatusForbidden, "Token \""+who.Name+"\" has role "+string(who.Role)+", which may only queue messages and cannot read: the status page needs a read or operate token.",
			"api login refused", "token", logSafe(who.Name), "result", "role "+string(who.Role)+" cannot read")
		return
	}
	session, err := set.Session(who, s.clock.Now().Add(SessionLifetime))
	if err != nil { // never: who was authenticated by a token
		fail(w, r, http.StatusInternalServerError, "sign a session: %v", err)
		return
	}
	setSessionCookie(w, r, session)
	s.log.Info("api login", "token", logSafe(who.Name), "role", string(who.Role), "remote", logSafe(r.RemoteAddr),
		"user_agent", logSafe(r.UserAgent()))
	http.Redirect(w, r, "./", http.StatusSeeOther)
}

// logout serves POST /logout: the cookie is cleared and the browser sent
// to the page (303). The session itself stays valid until it expires —
// sessions are stateless — so a copy of the cookie taken before the
// logout still works; rotating the token's value ends it. A cross-origin
// post is refused (403 JSON).
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if from, same := sameOrigin(r); !same {
		fail(w, r, http.StatusForbidden, "cross-origin logout refused: %s is not this server (%s)", from, r.Host)
		s.log.Warn("api logout refused", "result", logSafe(from), "remote", logSafe(r.RemoteAddr))
		return
	}
	name := access.AnonymousName
	if c, err := r.Cookie(SessionCookie); err == nil {
		if who, err := s.tokens.Load().Resume(c.Value, s.clock.Now()); err == nil {
			name = who.Name
		}
	}
	clearSessionCookie(w, r)
	s.log.Info("api logout", "token", logSafe(name), "remote", logSafe(r.RemoteAddr))
	http.Redirect(w, r, "./", http.StatusSeeOther)
}

// offerLogin answers a browser asking for the status page without a
// valid session with the login form (and status, message on it); it
// reports whether it did. Any other request (a script, curl, another
// path) gets the JSON error the caller writes instead. A server without
// tokens never gets here: its page needs no login.
func (s *Server) offerLogin(w http.ResponseWriter, r *http.Request, status int, message string) bool {
	if !asksForPage(r) {
		return false
	}
	s.loginForm(w, r, status, message)
	return true
}

// asksForPage reports whether r is a browser asking for the status page.
func asksForPage(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path == "/" &&
		strings.Contains(r.Header.Get("Accept"), "text/html")
}

// loginForm renders the login form with status and message.
func (s *Server) loginForm(w http.ResponseWriter, r *http.Request, status int, message string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agent-worker"`)
	}
	s.renderHTML(w, r, status, loginPage, struct{ Message, Lifetime string }{message, lifetimeText(SessionLifetime)}, loginCSP, "login form")
}

// lifetimeText says how long a session lasts, for the form: "12 hours".
func lifetimeText(d time.Duration) string {
	if d%time.Hour == 0 {
		if h := int(d / time.Hour); h != 1 {
			return strconv.Itoa(h) + " hours"
		}
		return "1 hour"
	}
	return d.String()
}
