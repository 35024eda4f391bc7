package inbox

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Untrusted text is made safe to show inside the external-data fence in one
// way, here: whatever a stranger wrote, it can neither end the fence nor
// begin a line the worker's own framing uses.
//
// The rules, applied to every untrusted field before it is rendered:
//
//   - Every line break Unicode knows ("\r\n", "\r", VT, FF, NEL U+0085, LS
//     U+2028, PS U+2029) is a line break: "\n" in a message's text, a
//     space in a one-line field (from, id, source, attribute keys and
//     values, names in the wake line).
//   - Invisible characters are removed: the other control characters
//     (C0 but tab, DEL, C1), format characters (Unicode category Cf:
//     zero-width spaces and joiners, bidi controls, the BOM, tag
//     characters) and variation selectors. So "<<\u200b<" is "<<<" before
//     the next rule looks at it. Invalid UTF-8 becomes U+FFFD.
//   - A run of three or more angle brackets, or characters that look like
//     them ("‹", "«", "＜", "〈", …), is written as ASCII brackets with a
//     space between each, "< < <": the fence's markers start with "<<<" and
//     end with ">>>", so no untrusted text can spell one.
//
// Letters, digits and every other character survive unchanged.

// Inline is s made safe as a one-line untrusted value (see the rules
// above): for a name the worker shows outside a message, such as a
// subagent's in the wake line.
func Inline(s string) string { return clean(s, " ") }

// Lines is s made safe as untrusted text, split into its lines (see the
// rules above). Trailing line breaks are dropped; "" is one empty line.
func Lines(s string) []string {
	return strings.Split(strings.TrimRight(clean(s, "\n"), "\n"), "\n")
}

// clean applies the rules with br for every line break.
func clean(s, br string) string {
	if isPlain(s, br) {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	b.Grow(len(s))
	run := 0 // angle-like runes of the current run written so far
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\r':
			if i+1 < len(rs) && rs[i+1] == '\n' {
				i++
			}
			b.WriteString(br)
			run = 0
			continue
		case isLineBreak(r):
			b.WriteString(br)
			run = 0
			continue
		case invisible(r):
			continue
		}
		if a, ok := angle(r); ok {
			// The run's length is counted once, at its first rune: a
			// stranger's text of nothing but brackets stays linear.
			if run > 0 || angleRun(rs, i) >= 3 {
				// Part of a run of three or more: spaced ASCII.
				if run > 0 {
					b.WriteByte(' ')
				}
				b.WriteRune(a)
				run++
				continue
			}
			b.WriteRune(r)
			continue
		}
		run = 0
		b.WriteRune(r)
	}
	return b.String()
}

// angleRun counts the angle-like runes from rs[i] on, skipping invisible
// ones (which clean removes).
func angleRun(rs []rune, i int) int {
	n := 0
	for ; i < len(rs); i++ {
		if invisible(rs[i]) {
			continue
		}
		if _, ok := angle(rs[i]); !ok {
			break
		}
		n++
	}
	return n
}

// isPlain reports whether s needs no change: printable ASCII, tabs,
// "\n" when br is "\n", and no two angle brackets in a row. Most text is.
func isPlain(s, br string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\n' && br == "\n":
		case c >= 0x80, c < 0x20 && c != '\t', c == 0x7f:
			return false
		case (c == '<' || c == '>') && i+1 < len(s) && (s[i+1] == '<' || s[i+1] == '>'):
			return false
		}
	}
	return true
}

// isLineBreak reports whether r is a line break other than "\r" (which
// may pair with "\n").
func isLineBreak(r rune) bool {
	switch r {
	case '\n', '\v', '\f', '\u0085', '\u2028', '\u2029':
		return true
	}
	return false
}

// invisible reports whether r is removed: a control character other than
// tab and the line breaks, a format character, or a variation selector.
func invisible(r rune) bool {
	switch {
	case r == '\t', r == '\r', isLineBreak(r):
		return false
	case r == utf8.RuneError:
		return false
	case unicode.IsControl(r), unicode.Is(unicode.Cf, r), unicode.Is(unicode.Variation_Selector, r):
		return true
	}
	return false
}

// angle reports whether r is an angle bracket or looks like one, and
// which ASCII bracket it is written as in a run.
func angle(r rune) (rune, bool) {
	switch r {
	case '<', '\u2039', '\u00ab', '\uff1c', '\ufe64', '\u3008', '\u2329', '\u27e8', '\u276e', '\u2770', '\u29fc',
		'\u27ea', '\u300a', '\u02c2', '\u22d6', '\u226a', '\u22d8', '\u2af7', '\u1438':
		return '<', true
	case '>', '\u203a', '\u00bb', '\uff1e', '\ufe65', '\u3009', '\u232a', '\u27e9', '\u276f', '\u2771', '\u29fd',
		'\u27eb', '\u300b', '\u02c3', '\u22d7', '\u226b', '\u22d9', '\u2af8', '\u1433':
		return '>', true
	}
	return 0, false
}
