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
	for i := 0; i < len(src); {
		if src[i] != '$' || i+1 == len(src) {
			out.WriteByte(src[i])
			i++
			continue
		}
		switch src[i+1] {
		case '$':
			out.WriteString("$$")
			i += 2
		case '{':
			end := bytes.IndexAny(src[i+2:], "}\n")
			if end < 0 || src[i+2+end] == '\n' {
				out.WriteString("${") // unterminated: expansion reports it
				i += 2
				continue
			}
			mark := fmt.Sprintf("%s_%d_", prefix, len(restore)/2)
			restore = append(restore, mark, string(src[i:i+2+end+1]))
			out.WriteString(mark)
			i += 2 + end + 1
		default:
			out.WriteByte('$')
			i++
		}
	}
	return out.Bytes(), strings.NewReplacer(restore...)
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
	for i := 0; i < len(s); {
		if s[i] != '$' || i+1 == len(s) {
			out.WriteByte(s[i])
			i++
			continue
		}
		at := i
		fail := func(format string, args ...any) {
			problems = append(problems, envProblem{at, fmt.Sprintf(format, args...)})
		}
		switch s[i+1] {
		case '$':
			out.WriteByte('$')
			i += 2
		case '{':
			end := strings.IndexAny(s[i+2:], "}\n")
			if end < 0 || s[i+2+end] == '\n' {
				fail("unterminated \"${\": want ${NAME} or ${NAME:-default} ($$ for a literal $)")
				out.WriteString("${")
				i += 2
				continue
			}
			ref := s[i+2 : i+2+end]
			i += 2 + end + 1
			name, def, hasDefault := strings.Cut(ref, ":-")
			if !envName.MatchString(name) {
				fail("bad reference \"${%s}\": want ${NAME} or ${NAME:-default} ($$ for a literal $)", ref)
				continue
			}
			val, ok := lookupEnv(name)
			switch {
			case hasDefault && val == "":
				val = def
			case !ok:
				fail("environment variable %s is not set (write ${%s:-default} to give a default)", name, name)
				continue
			}
			out.WriteString(val)
		default:
			out.WriteByte('$')
			i++
		}
	}
	return out.String(), problems
}
