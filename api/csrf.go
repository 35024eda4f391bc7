package api

import (
	"net/http"
	"net/url"
	"strings"
)

// CSRFHeader carries the anti-forgery token of a request authenticated by
// the session cookie. The status page embeds the token (a meta element
// named "csrf-token") and its script sends it with every verb.
const CSRFHeader = "X-CSRF-Token"

// checkCSRF guards a write authenticated by the session cookie against
// cross-site request forgery, on top of the cookie's SameSite=Strict:
//
//   - an Origin header, or failing that a Referer, when present, must
//     name this server (its host as the request addressed it);
//   - CSRFHeader must hold the session's anti-forgery token
//     (access.Caller.CSRF: an HMAC of the session keyed like it, so any
//     replica can check it and it ends with the session).
//
// Otherwise the request is answered 403 JSON and logged, and checkCSRF
// returns false. A bearer-authenticated request never comes here: a
// header a script on another site cannot make the browser send needs no
// such guard.
func (s *Server) checkCSRF(w http.ResponseWriter, r *http.Request, who caller, session string) bool {
	var refusal string
	if from, same := sameOrigin(r); !same {
		refusal = "cross-origin request refused: " + from + " is not this server (" + r.Host + ")"
	} else if presented := r.Header.Get(CSRFHeader); presented == "" {
		refusal = "a request authenticated by the session cookie needs the " + CSRFHeader + " header (the status page sends it)"
	} else if !who.CheckCSRF(session, presented) {
		refusal = "the " + CSRFHeader + " header does not match the session: reload the status page"
	}
	if refusal == "" {
		return true
	}
	fail(w, r, http.StatusForbidden, "%s", refusal)
	s.log.Warn("api session write refused", "method", logSafe(r.Method), "path", logSafe(r.URL.Path), "token", logSafe(who.Name),
		"result", logSafe(refusal), "remote", logSafe(r.RemoteAddr), "origin", logSafe(r.Header.Get("Origin")),
		"user_agent", logSafe(r.UserAgent()))
	return false
}

// sameOrigin reports whether the browser says the request comes from a
// page of this server: true when neither Origin nor Referer is present
// (not every client sends them), false when the one present names another
// host or is opaque ("null"). from names what it checked, for the answer.
func sameOrigin(r *http.Request) (from string, same bool) {
	h, what := r.Header.Get("Origin"), "Origin"
	if h == "" {
		h, what = r.Header.Get("Referer"), "Referer"
	}
	if h == "" {
		return "", true
	}
	from = what + " " + h
	u, err := url.Parse(h)
	if err != nil || u.Host == "" {
		return from, false
	}
	return from, strings.EqualFold(u.Host, r.Host)
}
