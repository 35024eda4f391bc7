package access

import (
	pathpkg "path"
	"slices"
)

// AnonymousName is the name of a caller without a token, where a
// transport lets one in (a server without tokens on loopback, an open
// path): what the audit trail records as "by".
const AnonymousName = "anonymous"

// Caller is who made a request.
type Caller struct {
	Name string
	Role Role
	// Agents limits the caller to these agents (names or globs); empty:
	// every agent.
	Agents []string
	// set is the token set the caller was authenticated against, nil on
	// an open path; cred is its token, nil when the set had none.
	set  *Set
	cred *credential
}

// Anonymous is the caller without a token where one is let in: everything
// is allowed. It is bound to no set (an open path: always valid).
var Anonymous = Caller{Name: AnonymousName, Role: RoleOperate}

// Authenticated reports whether a token stands for the caller (a bearer
// token, or a session signed with one): its Name is then the token's
// name. False for the caller let in without a token (Anonymous, and a set
// without tokens), whose Name is AnonymousName — which a token may also
// be named: ask this, not the name.
func (c Caller) Authenticated() bool { return c.cred != nil }

// MayAccess reports whether the caller may see or act on agent. The zero
// Caller (no role) may not.
func (c Caller) MayAccess(agent string) bool {
	return c.Role != "" && InScope(c.Agents, agent)
}

// InScope reports whether agent matches one of patterns (names or
// path.Match globs); every agent does when there are none.
func InScope(patterns []string, agent string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, _ := pathpkg.Match(p, agent); ok { // patterns are checked by NewSet
			return true
		}
	}
	return false
}

// Set returns the set the caller was authenticated against; nil on an
// open path.
func (c Caller) Set() *Set { return c.set }

// ValidIn reports whether the caller's authentication still holds under
// set: an open path always; a caller let in without a token while set
// still has none; a token while set holds the same token with the same
// name, role and agents.
func (c Caller) ValidIn(set *Set) bool {
	switch {
	case c.set == nil:
		return true
	case c.cred == nil:
		return set.Empty()
	}
	for _, t := range set.creds {
		if t.digest == c.cred.digest && t.name == c.cred.name && t.role == c.cred.role && slices.Equal(t.agents, c.cred.agents) {
			return true
		}
	}
	return false
}
