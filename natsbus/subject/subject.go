// Package subject matches NATS subjects against patterns, and names the
// subjects internal to the worker (Internal), without depending on a NATS
// client: config validation and the publish tool both check what an
// agent may publish to with it.
package subject

import "strings"

// Match reports whether subject matches the NATS pattern: dot-separated
// tokens, "*" for exactly one token, a final ">" for one or more.
func Match(pattern, subject string) bool {
	p := strings.Split(pattern, ".")
	t := strings.Split(subject, ".")
	for i, tok := range p {
		switch {
		case tok == ">":
			return i < len(t)
		case i >= len(t):
			return false
		case tok != "*" && tok != t[i]:
			return false
		}
	}
	return len(p) == len(t)
}

// Valid reports whether s is a publishable subject: non-empty tokens, no
// wildcards, no whitespace.
func Valid(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n*>") {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" {
			return false
		}
	}
	return true
}

// Overlap reports whether some subject matches both patterns: then one
// message could reach two consumers filtered on them.
func Overlap(a, b string) bool {
	p, q := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; ; i++ {
		switch {
		case i == len(p) && i == len(q):
			return true
		case i == len(p) || i == len(q):
			return false // one pattern ended; the other needs more tokens
		case p[i] == ">" || q[i] == ">":
			return true // ">" takes whatever one or more tokens the other has here
		case p[i] != "*" && q[i] != "*" && p[i] != q[i]:
			return false
		}
	}
}
