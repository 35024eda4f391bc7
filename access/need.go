package access

import "fmt"

// Need is what an operation (an API route, a control verb) needs of a
// caller's role. The zero Need is Read.
type Need int

const (
	// Read: read or operate (looking, changing nothing).
	Read Need = iota
	// Ingest: ingest or operate (queueing messages).
	Ingest
	// Operate: operate only (every other change).
	Operate
)

// Allows reports whether role may do what needs n.
func (n Need) Allows(role Role) bool {
	switch role {
	case RoleOperate:
		return true
	case RoleRead:
		return n == Read
	case RoleIngest:
		return n == Ingest
	}
	return false
}

// Roles names the roles that n allows, for error messages: "\"read\" or
// \"operate\"".
func (n Need) Roles() string {
	switch n {
	case Read:
		return fmt.Sprintf("%q or %q", RoleRead, RoleOperate)
	case Ingest:
		return fmt.Sprintf("%q or %q", RoleIngest, RoleOperate)
	}
	return fmt.Sprintf("%q", RoleOperate)
}
