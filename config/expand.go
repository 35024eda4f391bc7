package config

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseExpanded parses src as YAML and expands ${VAR}, ${VAR:-default}
// and $$ inside the value of every scalar, in place (see Load). It returns
// the document, or the YAML syntax error, or every bad or unset reference
// with the line of its scalar.
//
// Expansion changes values only, never the tree: whatever a variable holds
// becomes part of one scalar, so it cannot add a key, an item or an
// anchor. A plain (unquoted, untagged) scalar whose value changed has its
// type resolved again from the new value, as if the value had been written
// there ("8080" an int, "true" a bool, "[x]" a string); a quoted, block or
// tagged scalar keeps its type. Mapping keys are taken as written: a key
// holding a ${...} reference is reported, so that a reference is never
// taken literally without a word. Comments are not expanded. An alias is
// its anchor's node, expanded once, where anchored.
func parseExpanded(src []byte, file string, lookupEnv func(string) (string, bool)) (*yaml.Node, []Error) {
	marked, restore := markRefs(src)
	var doc yaml.Node
	if err := yaml.Unmarshal(marked, &doc); err != nil {
		e := syntaxError(file, err)
		e.Msg = restore.Replace(e.Msg) // "unknown anchor '${X}'", not its mark
		return nil, []Error{e}
	}
	var errs []Error
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, item := range n.Content {
				walk(item)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if k := n.Content[i]; k.Kind == yaml.ScalarNode {
					if v := restore.Replace(k.Value); v != k.Value {
						k.Value = v
						errs = append(errs, Error{File: file, Line: k.Line, Msg: fmt.Sprintf("key %q: ${...} is expanded in values only, not in keys", k.Value)})
					}
				}
				walk(n.Content[i+1])
			}
		case yaml.ScalarNode:
			n.Value = restore.Replace(n.Value)
			errs = append(errs, expandScalar(n, file, lookupEnv)...)
		}
	}
	walk(&doc)
	return &doc, errs
}

// markRefs replaces every ${...} of src (that ends on its line) with a
// mark, a plain word, while src is parsed: YAML refuses "{" and "}" in an
// unquoted value inside a flow collection ({min: ${MIN}}), where a mark is
// a value like any other. A mark holds no part of any variable's value;
// the returned replacer puts each reference back as written. "$$" is
// skipped whole, as expansion will read it.
func markRefs(src []byte) ([]byte, *strings.Replacer) {
	prefix := "awEnvRef"
	for bytes.Contains(src, []byte(prefix)) {
		prefix += "x"
	}
	var (
		out     bytes.Buffer
		restore []string
	)
	out.Grow(len(src))
	scanRefs(string(src), func(t refToken) {
		if t.kind != refWhole {
			out.WriteString(t.raw) // "$$" and an unterminated "${" as written
			return
		}
		mark := fmt.Sprintf("%s_%d_", prefix, len(restore)/2)
		restore = append(restore, mark, t.raw)
		out.WriteString(mark)
	})
	return out.Bytes(), strings.NewReplacer(restore...)
}

// refKind is what a piece of a value is to expansion.
type refKind int

const (
	refText       refKind = iota // text, a lone "$" included
	refDollar                    // "$$": a literal "$"
	refUnfinished                // "${" with no "}" on its line
	refWhole                     // "${...}": ref is what is inside
)

// refToken is one piece of a value: raw as written, starting at byte at.
type refToken struct {
	kind refKind
	raw  string
	ref  string // refWhole: between "${" and "}"
	at   int
}

// scanRefs cuts s into the pieces expansion reads, in order: the one
// grammar of ${VAR}, ${VAR:-default} and $$, for marking (markRefs) and
// expanding (expandValue) alike. A reference does not span a line break.
func scanRefs(s string, yield func(refToken)) {
	text := 0 // start of the text not yielded yet
	flush := func(to int) {
		if to > text {
			yield(refToken{kind: refText, raw: s[text:to], at: text})
		}
	}
	for i := 0; i < len(s); {
		if s[i] != '$' || i+1 == len(s) {
			i++
			continue
		}
		switch s[i+1] {
		case '$':
			flush(i)
			yield(refToken{kind: refDollar, raw: "$$", at: i})
			i += 2
		case '{':
			flush(i)
			end := strings.IndexAny(s[i+2:], "}\n")
			if end < 0 || s[i+2+end] == '\n' {
				yield(refToken{kind: refUnfinished, raw: "${", at: i})
				i += 2
			} else {
				yield(refToken{kind: refWhole, raw: s[i : i+3+end], ref: s[i+2 : i+2+end], at: i})
				i += 3 + end
			}
		default:
			i++
			continue
		}
		text = i
	}
	flush(len(s))
}

// expandScalar expands the references in scalar n's value.
func expandScalar(n *yaml.Node, file string, lookupEnv func(string) (string, bool)) []Error {
	if !strings.Contains(n.Value, "$") {
		return nil
	}
	val, problems := expandValue(n.Value, lookupEnv)
	errs := make([]Error, len(problems))
	for i, p := range problems {
		errs[i] = Error{File: file, Line: n.Line + valueLine(n, p.at), Msg: p.msg}
	}
	if val != n.Value {
		n.Value = val
		if n.Style == 0 { // plain and untagged: the value decides the type
			n.Tag = ""
			if n.Tag = n.ShortTag(); n.Tag == "!!merge" {
				n.Tag = "!!str" // "<<" is a merge only when written as a key
			}
		}
	}
	return errs
}

// valueLine is how many lines below n.Line the byte at of n's value was
// written. Only a literal block (|) keeps the file's line breaks in its
// value; in any other style the scalar's own line is the best answer.
func valueLine(n *yaml.Node, at int) int {
	if n.Style&yaml.LiteralStyle == 0 {
		return 0
	}
	return 1 + strings.Count(n.Value[:at], "\n")
}

// envProblem is a bad or unset reference at byte at of a value.
type envProblem struct {
	at  int
	msg string
}

// expandValue replaces ${VAR}, ${VAR:-default} and $$ in s; any other "$"
// is left alone. A reference does not span a line break. A bad or unset
// reference expands to "", an unterminated "${" stays as written; each is
// reported.
func expandValue(s string, lookupEnv func(string) (string, bool)) (string, []envProblem) {
	var (
		out      strings.Builder
		problems []envProblem
	)
	out.Grow(len(s))
	scanRefs(s, func(t refToken) {
		fail := func(format string, args ...any) {
			problems = append(problems, envProblem{t.at, fmt.Sprintf(format, args...)})
		}
		switch t.kind {
		case refText:
			out.WriteString(t.raw)
		case refDollar:
			out.WriteByte('$')
		case refUnfinished:
			fail("unterminated \"${\": want ${NAME} or ${NAME:-default} ($$ for a literal $)")
			out.WriteString(t.raw)
		case refWhole:
			name, def, hasDefault := strings.Cut(t.ref, ":-")
			if !envName.MatchString(name) {
				fail("bad reference \"${%s}\": want ${NAME} or ${NAME:-default} ($$ for a literal $)", t.ref)
				return
			}
			val, ok := lookupEnv(name)
			switch {
			case hasDefault && val == "":
				val = def
			case !ok:
				fail("environment variable %s is not set (write ${%s:-default} to give a default)", name, name)
				return
			}
			out.WriteString(val)
		}
	})
	return out.String(), problems
}
