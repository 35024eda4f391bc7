package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
)

// credential is a configured token, kept as a digest: comparing digests
// of equal length keeps the comparison constant-time whatever the length
// of the presented token.
type credential struct {
	name   string
	role   Role
	digest [sha256.Size]byte
}

// caller is who made a request.
type caller struct {
	name string
	role Role
}

// anonymous is the caller when no tokens are configured (loopback only):
// everything is allowed.
var anonymous = caller{name: "anonymous", role: RoleOperate}

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
		case t.Role != RoleRead && t.Role != RoleOperate:
			return nil, fmt.Errorf("%w: api.tokens[%d] (%s) has role %q; want %q or %q", ErrBadToken, i, name, t.Role, RoleRead, RoleOperate)
		}
		out = append(out, credential{name: name, role: t.Role, digest: sha256.Sum256([]byte(t.Value))})
	}
	return out, nil
}

// authenticate finds the caller. Open paths and a server without tokens
// let everyone in; otherwise the request needs "Authorization: Bearer
// <token>" matching a configured token, or it is answered 401.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (caller, bool) {
	if len(s.tokens) == 0 || s.open[r.URL.Path] {
		return anonymous, true
	}
	presented, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agent-worker"`)
		fail(w, r, http.StatusUnauthorized, "missing bearer token: send Authorization: Bearer <token>")
		s.log.Warn("api request without a token", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		return caller{}, false
	}
	digest := sha256.Sum256([]byte(presented))
	var found *credential
	// Every token is compared, match or not, so the time taken does not
	// say which one matched.
	for i := range s.tokens {
		if subtle.ConstantTimeCompare(digest[:], s.tokens[i].digest[:]) == 1 && found == nil {
			found = &s.tokens[i]
		}
	}
	if found == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agent-worker", error="invalid_token"`)
		fail(w, r, http.StatusUnauthorized, "invalid bearer token")
		s.log.Warn("api request with an invalid token", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		return caller{}, false
	}
	return caller{name: found.name, role: found.role}, true
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
