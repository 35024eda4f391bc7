// Package subject matches NATS subjects against patterns, and names the
// subjects internal to the worker (Internal), without depending on a NATS
// client: config validation and the publish tool both check what an
// agent may publish to with it.
package subject

import (
	"fmt"
	"strings"
)

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

// Covers reports whether every subject that matches narrow also matches
// wide (a pattern covers itself): a stream over wide holds narrow's
// messages.
func Covers(wide, narrow string) bool {
	w, n := strings.Split(wide, "."), strings.Split(narrow, ".")
	for i := 0; ; i++ {
		switch {
		case i < len(w) && w[i] == ">":
			return i < len(n)
		case i == len(w) || i == len(n):
			return i == len(w) && i == len(n)
		case n[i] == ">":
			return false // narrow takes more tokens here than wide's one
		case w[i] != "*" && w[i] != n[i]:
			return false
		}
	}
}

// Cover returns patterns without those another covers, in their order,
// each once: the subjects a stream needs to hold them all. It fails when
// two that remain overlap, since a stream's subjects may not: neither
// holds all of the other, and no message may be stored twice.
func Cover(patterns []string) ([]string, error) {
	var out []string
	for i, p := range patterns {
		covered := false
		for j, q := range patterns {
			if i != j && Covers(q, p) && (!Covers(p, q) || j < i) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, p)
		}
	}
	for i, p := range out {
		for _, q := range out[:i] {
			if Overlap(p, q) {
				return nil, fmt.Errorf("subjects %q and %q overlap but neither contains the other: one stream cannot hold both; make one contain the other (e.g. %q) or make them disjoint", q, p, common(q, p))
			}
		}
	}
	return out, nil
}

// common is a pattern that covers both a and b: their shared leading
// tokens, then ">".
func common(a, b string) string {
	p, q := strings.Split(a, "."), strings.Split(b, ".")
	var out []string
	for i := 0; i < len(p) && i < len(q) && p[i] == q[i] && p[i] != ">"; i++ {
		out = append(out, p[i])
	}
	return strings.Join(append(out, ">"), ".")
}
