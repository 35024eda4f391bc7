package api

import (
	_ "embed"
	"net/http"

	"github.com/agent-worker/agent-worker/access"
)

// pageScriptRoute serves the status page's script.
const pageScriptRoute = "GET /status.js"

//go:embed status.js
var pageScript []byte

// pageCSP is the status page's Content-Security-Policy: its own script
// (status.js) and requests to this server only, inline styles, forms
// (the logout) posting here, no framing. No inline script runs, so
// nothing a template let through could execute.
const pageCSP = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"

// pageViewer is who looks at the status page, and so what it offers.
type pageViewer struct {
	// Name is the caller's: a token's name, or "anonymous" on a server
	// without tokens.
	Name string
	Role Role
	// Session: the page was authenticated by the session cookie; it
	// names the caller and offers a logout.
	Session bool
	// CSRF is the session's anti-forgery token, which the page's script
	// sends with every verb (CSRFHeader); "" without a session.
	CSRF string
	// Operate: the caller's verbs would be carried out (role operate),
	// so the page shows their buttons and loads its script. A read
	// caller sees neither; the API would refuse its verbs (403) anyway.
	// Nor does the anonymous caller of a page served on an open path
	// (api.open_paths) while the server has tokens: its verbs would be
	// 401.
	Operate bool
}

// pageViewerOf describes the caller of a status page request.
func (s *Server) pageViewerOf(r *http.Request) pageViewer {
	rec := record(r)
	operate := access.Operate.Allows(rec.who.Role)
	if rec.who.Set() == nil { // let in by an open path, not by a token
		operate = s.tokens.Load().Empty()
	}
	v := pageViewer{Name: rec.who.Name, Role: rec.who.Role, Session: rec.session != "", Operate: operate}
	if v.Session {
		v.CSRF = rec.who.CSRF(rec.session)
	}
	return v
}

// scriptRoute is GET /status.js, which needs what the page needs
// (read).
func (s *Server) scriptRoute() route {
	return readRoute(pageScriptRoute, servePageScript)
}

func servePageScript(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(pageScript)
}
