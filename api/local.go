package api

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// A server without tokens lets every request in (anonymous), which New
// and Serve allow on loopback only. Loopback alone does not make a
// request this machine's own: a page on any site, open in a browser on
// this machine, can send requests to 127.0.0.1 — by a form or a script
// (cross-site request forgery) or under its own name re-pointed at
// 127.0.0.1 (DNS rebinding), which also lets it read the answers. So such
// a server also checks what the browser says about where a request comes
// from (servesLocal). A server with tokens does not: a page on another
// site cannot send a bearer token, and a session's writes have their own
// guard (checkCSRF).

// servesLocal decides whether a server without tokens serves r, and
// answers it when not:
//
//   - 421 Misdirected Request when r's Host is not a loopback name or
//     address (localhost, 127.0.0.0/8, ::1; any port) nor the host of the
//     listen address: a DNS-rebinding page addresses the server under its
//     own name. Every path, the open ones too.
//   - 403 for a write (any method but GET, HEAD, OPTIONS) a browser says
//     comes from another page: an Origin whose host is not loopback (or
//     is opaque, "null"), or a Sec-Fetch-Site other than same-origin
//     (the status page) and none (typed by the user). same-site is
//     refused too: a page on another port of localhost is another
//     program's.
//
// Clients that send neither header (the CLI, curl, scripts) are served
// as before. Reads are not refused for their Origin: without CORS
// headers another site's page cannot read the answer. Each refusal is
// logged. Not guaranteed: a local program, or a browser that sends
// neither header nor a real Host, is not told apart from the CLI — on
// loopback without tokens, every local process may drive the agents.
func (s *Server) servesLocal(w http.ResponseWriter, r *http.Request) bool {
	var status int
	var refusal string
	switch {
	case !s.localHost(r.Host):
		status = http.StatusMisdirectedRequest
		refusal = "this API has no tokens (api.tokens), so it serves only requests addressed to this machine: Host " +
			quote(r.Host) + " is not a loopback name or address (localhost, 127.0.0.1, [::1]) nor the listen address " +
			s.o.Listen + "; address it as http://127.0.0.1:<port>, or configure api.tokens to serve other names"
	case isWrite(r.Method):
		why := s.crossSite(r)
		if why == "" {
			return true
		}
		status = http.StatusForbidden
		refusal = "cross-site write refused: " + why + "; this API has no tokens (api.tokens), so it takes writes only from " +
			"this machine's own clients (the CLI, curl, the status page)"
	default:
		return true
	}
	fail(w, r, status, "%s", refusal)
	s.log.Warn("api request refused: not from this machine", "method", logSafe(r.Method), "path", logSafe(r.URL.Path),
		"status", status, "host", logSafe(r.Host), "origin", logSafe(r.Header.Get("Origin")),
		"sec_fetch_site", logSafe(r.Header.Get("Sec-Fetch-Site")), "remote", logSafe(r.RemoteAddr), "user_agent", logSafe(r.UserAgent()))
	return false
}

// crossSite says why a browser's headers place r on another site's page
// ("" when they do not, or are absent).
func (s *Server) crossSite(r *http.Request) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return "Sec-Fetch-Site is " + quote(site) + " (only same-origin and none are taken)"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || !s.localHost(u.Host) {
		return "Origin " + quote(origin) + " is not this machine"
	}
	return ""
}

// localHost reports whether hostport (a Host header, an Origin's host;
// the port optional) names this machine: localhost, a loopback address,
// or the host of the listen address (Options.Listen, or the address
// Serve listens on).
func (s *Server) localHost(hostport string) bool {
	host := hostOf(hostport)
	if host == "" {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, listen := range []string{s.o.Listen, s.Addr()} {
		if h := hostOf(listen); h != "" && strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}

// hostOf is the host of "host:port", "host", "[v6]:port" or "[v6]".
func hostOf(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// quote quotes a client's value for an answer, cut as log values are.
func quote(v string) string { return `"` + logSafe(v) + `"` }
