package api

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// maxLogValue bounds, in bytes, a client-supplied value in a log line.
const maxLogValue = 256

// clipMark ends a value logSafe cut.
const clipMark = "…"

// logSafe makes a client-supplied value (a path, an agent name, an id, a
// header value, the remote address, a result that quotes any of them)
// fit for a log line, whatever the log handler:
//
//   - every character that is not printable — newlines, carriage returns,
//     NUL, the ESC that starts an ANSI sequence, other control and format
//     characters such as U+2028 or U+202E — is written as Go escapes it
//     (\n, \r, \x00, \x1b, \u2028), and so is each byte of invalid UTF-8;
//   - the result is at most maxLogValue bytes: when the escaped value is
//     longer, it is cut at a character boundary and ends in "…".
//
// Printable text, including non-ASCII letters, is left as it is, so a
// short ordinary value is returned unchanged. The work done is bounded by
// maxLogValue, not by the length of s.
func logSafe(s string) string {
	if len(s) <= maxLogValue && printable(s) {
		return s
	}
	buf := make([]byte, 0, maxLogValue)
	cut := 0 // where to cut if the value turns out too long
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		piece := s[i : i+size]
		if (r == utf8.RuneError && size == 1) || !unicode.IsPrint(r) {
			q := strconv.Quote(piece)
			piece = q[1 : len(q)-1]
		}
		if len(buf)+len(piece) > maxLogValue {
			return string(buf[:cut]) + clipMark
		}
		buf = append(buf, piece...)
		if len(buf) <= maxLogValue-len(clipMark) {
			cut = len(buf)
		}
		i += size
	}
	return string(buf)
}

// printable reports whether s is valid UTF-8 of printable characters only.
func printable(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return false
			}
		}
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
