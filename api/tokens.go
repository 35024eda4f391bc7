package api

import (
	"errors"
	"fmt"

	"github.com/agent-worker/agent-worker/access"
	"github.com/agent-worker/agent-worker/config"
)

// Errors New, Serve and SetTokens return.
var (
	// ErrNoToken: the API would listen beyond loopback without a token.
	ErrNoToken = errors.New("refusing to serve the operator API beyond loopback without a token")
	// ErrBadToken: a configured token is unusable (no value, unknown
	// role, a bad agent glob); it is access.ErrBadToken.
	ErrBadToken = access.ErrBadToken
)

// Role is what a token may do (access.Role); the package documentation
// has the table of which role each route needs.
type Role = access.Role

// Roles. Operate includes read and ingest; read and ingest share nothing.
const (
	// RoleRead may use the GET routes only.
	RoleRead = access.RoleRead
	// RoleIngest may only queue messages: POST
	// /v1/agents/{name}/messages and POST /v1/alertmanager/{name}. It
	// cannot read, so a leaked webhook token shows nothing.
	RoleIngest = access.RoleIngest
	// RoleOperate may use every route.
	RoleOperate = access.RoleOperate
)

// Token is one bearer token (access.Token). Name appears in logs and
// error messages; Value never does. Agents limits the token to these
// agents: names, or path.Match globs such as "payments-*"; empty: every
// agent. A request that names an agent outside them is answered 403, and
// lists and event streams leave such agents out.
type Token = access.Token

// tokenStore is the token store the server authenticates against:
// Options.Access when shared with other transports, else one holding
// Options.Tokens. It enforces the no-token rule: without a token the API
// must not be reachable beyond loopback, where anyone could drive it.
func tokenStore(o Options) (*access.Tokens, error) {
	tokens := o.Access
	if tokens == nil {
		set, err := access.NewSet(o.Tokens)
		if err != nil {
			return nil, err
		}
		tokens = access.NewTokens(set)
	} else if len(o.Tokens) > 0 {
		return nil, errors.New("api: set Options.Tokens or Options.Access, not both")
	}
	if tokens.Load().Empty() && !config.IsLoopback(o.Listen) {
		return nil, fmt.Errorf("%w: api.listen %q is reachable beyond loopback and api.tokens is empty; add a token to api.tokens (role read, ingest or operate) or set api.listen to a loopback address such as 127.0.0.1:8080", ErrNoToken, o.Listen)
	}
	return tokens, nil
}

// SetTokens replaces the accepted tokens while the server runs (for
// rotation), checked as New checks them. On error the tokens in force
// stay. Guarantees:
//
//   - The swap is atomic: each request is authenticated against the old
//     set or the new one, never a mix, so a token present in both is never
//     refused during the swap.
//   - Once SetTokens returns, a token no longer in the set gets 401; a
//     request it authenticated before the swap finishes as it began.
//   - Event streams opened with a token that the new set no longer holds
//     with the same name, role and agents end (as do streams opened
//     without a token when the new set has tokens).
//   - The no-token rule of New holds: an empty set is refused with
//     ErrNoToken while the server listens, or would listen
//     (Options.Listen), beyond loopback.
//
// It is safe to call concurrently with requests, Serve and itself.
func (s *Server) SetTokens(tokens []Token) error {
	set, err := access.NewSet(tokens)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if set.Empty() {
		if s.srv != nil && s.exposed {
			return fmt.Errorf("%w: the API listens on %s, beyond loopback; keeping the current tokens", ErrNoToken, s.addr)
		}
		if s.srv == nil && !config.IsLoopback(s.o.Listen) {
			return fmt.Errorf("%w: api.listen %q is reachable beyond loopback; keeping the current tokens", ErrNoToken, s.o.Listen)
		}
	}
	s.tokens.Replace(set)
	return nil
}
