package api

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestLogSafe(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"alpha", "alpha"},
		{"café – ok", "café – ok"},
		{strings.Repeat("a", maxLogValue), strings.Repeat("a", maxLogValue)},
		{strings.Repeat("a", maxLogValue+1), strings.Repeat("a", maxLogValue-len(clipMark)) + clipMark},
		{"a\nb\r\x00\x1b[31mred\x1b[0m\t", `a\nb\r\x00\x1b[31mred\x1b[0m\t`},
		{"bad \xff byte", `bad \xff byte`},
		{"line\u2028sep \u202eevil", `line\u2028sep \u202eevil`},
	}
	for _, c := range cases {
		if got := logSafe(c.in); got != c.want {
			t.Errorf("logSafe(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// Long values of every kind: bounded, valid UTF-8, printable, cut at a
	// whole character or escape.
	for _, in := range []string{
		strings.Repeat("é", 500),
		strings.Repeat("\x00", 500),
		strings.Repeat("ab\n", 500),
		strings.Repeat("\xff", 500),
		strings.Repeat("x", 500<<10),
	} {
		got := logSafe(in)
		if len(got) > maxLogValue || !strings.HasSuffix(got, clipMark) || !utf8.ValidString(got) {
			t.Errorf("logSafe(%.20q…) = %q (%d bytes)", in, got, len(got))
		}
		if strings.ContainsFunc(got, func(r rune) bool { return !unicode.IsPrint(r) }) {
			t.Errorf("logSafe(%.20q…) kept a non-printable character: %q", in, got)
		}
		body := strings.TrimSuffix(got, clipMark)
		if strings.HasPrefix(in, "\x00") && len(body)%4 != 0 || strings.HasPrefix(in, "ab") && strings.HasSuffix(body, `\`) {
			t.Errorf("logSafe(%.20q…) cut an escape in two: %q", in, got)
		}
	}
}
