package access

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	pathpkg "path"
	"slices"
	"strings"
	"sync/atomic"
)

// ErrBadToken is matched (errors.Is) by NewSet's error for an unusable
// token: no value, an unknown role, a bad agent glob.
var ErrBadToken = errors.New("bad API token")

// Role is what a token may do.
type Role string

// Roles. Operate includes read and ingest; read and ingest share nothing.
const (
	// RoleRead may read only (the API's GET routes, the control verbs
	// that change nothing).
	RoleRead Role = "read"
	// RoleIngest may only queue messages. It cannot read, so a leaked
	// webhook token shows nothing.
	RoleIngest Role = "ingest"
	// RoleOperate may do everything.
	RoleOperate Role = "operate"
)

// Token is one bearer token. Name appears in logs, error messages and the
// audit trail; Value never does.
type Token struct {
	Name  string
	Role  Role
	Value string
	// Agents limits the token to these agents: names, or path.Match
	// globs such as "payments-*". Empty: every agent.
	Agents []string
}

// credential is a configured token, kept as a digest: comparing digests
// of equal length keeps the comparison constant-time whatever the length
// of the presented token.
type credential struct {
	name   string
	role   Role
	agents []string // names or path.Match globs; empty: every agent
	digest [sha256.Size]byte
	// sessionKey signs the token's browser sessions (session.go).
	sessionKey [sha256.Size]byte
}

// Set is the tokens in force at one moment. It is never changed in place:
// a rotation replaces it whole (Tokens.Replace), and closes Changed.
type Set struct {
	creds   []credential
	changed chan struct{}
}

// NewSet checks tokens and keeps their digests: every token needs a value
// and a known role, and its agents must be names or valid globs (else an
// error wrapping ErrBadToken that names api.tokens[i], never a value).
// No tokens make an empty Set.
func NewSet(tokens []Token) (*Set, error) {
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
		out = append(out, credential{name: name, role: t.Role, agents: slices.Clone(t.Agents), digest: sha256.Sum256([]byte(t.Value)), sessionKey: sessionKeyOf(t.Value)})
	}
	return &Set{creds: out, changed: make(chan struct{})}, nil
}

// Empty reports whether the set holds no token: callers are not
// authenticated at all (each transport says where it allows that).
func (s *Set) Empty() bool { return len(s.creds) == 0 }

// Changed is closed once the set is no longer in force.
func (s *Set) Changed() <-chan struct{} { return s.changed }

// Authenticate returns the caller presented (a token's value) stands for,
// and false when no token of the set has that value. Every token is
// compared, match or not, so the time taken does not say which matched.
func (s *Set) Authenticate(presented string) (Caller, bool) {
	digest := sha256.Sum256([]byte(presented))
	var found *credential
	for i := range s.creds {
		if subtle.ConstantTimeCompare(digest[:], s.creds[i].digest[:]) == 1 && found == nil {
			found = &s.creds[i]
		}
	}
	if found == nil {
		return Caller{}, false
	}
	return Caller{Name: found.name, Role: found.role, Agents: found.agents, set: s, cred: found}, true
}

// Anonymous returns the caller of a transport that lets callers in
// without a token while s is empty: Anonymous, bound to s, so ValidIn
// ends its authentication once tokens appear.
func (s *Set) Anonymous() Caller {
	who := Anonymous
	who.set = s
	return who
}

// Tokens holds the Set in force, shared by every transport that
// authenticates callers. It is safe for concurrent use; Load and Replace
// never block each other.
type Tokens struct {
	cur atomic.Pointer[Set]
}

// NewTokens holds set (nil: an empty one).
func NewTokens(set *Set) *Tokens {
	if set == nil {
		set, _ = NewSet(nil)
	}
	t := &Tokens{}
	t.cur.Store(set)
	return t
}

// Load returns the set in force. A request is checked against the one
// set it loaded, never a mix, even while Replace swaps it.
func (t *Tokens) Load() *Set { return t.cur.Load() }

// Replace puts set in force and closes the old set's Changed. Once it
// returns, Load returns set.
func (t *Tokens) Replace(set *Set) {
	old := t.cur.Swap(set)
	close(old.changed)
}

// Bearer extracts the token of an Authorization header value ("Bearer
// <token>", the scheme in any case); false when there is none.
func Bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
