package textclip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRunes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    string
		n    int
		mark string
		want string
	}{
		{"", 0, "…", ""},
		{"", 3, "…", ""},
		{"abc", 3, "…", "abc"},
		{"abc", 4, "…", "abc"},
		{"abcd", 3, "…", "abc…"},
		{"abc", 1, "…", "a…"},
		{"abc", 0, "…", "…"},
		{"abc", -1, "…", "…"},
		{"abc", 2, "", "ab"},
		{"ééé", 3, "…", "ééé"},
		{"éééé", 3, "…", "ééé…"},
		{"日本語テキスト", 3, " [clipped]", "日本語 [clipped]"},
		{"a😀b", 2, "…", "a😀…"},
		{"a\xffbc", 2, "…", "a\xff…"},  // an invalid byte is one rune, kept
		{"\xe2\x82x", 1, "…", "\xe2…"}, // a truncated sequence is runes of single bytes
		{"\x80\x80\x80", 2, "", "\x80\x80"},
	}
	for _, tt := range tests {
		if got := Runes(tt.s, tt.n, tt.mark); got != tt.want {
			t.Errorf("Runes(%q, %d, %q) = %q, want %q", tt.s, tt.n, tt.mark, got, tt.want)
		}
	}
}

func TestRunesWithin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    string
		n    int
		mark string
		want string
	}{
		{"", 0, "…", ""},
		{"abc", 3, "…", "abc"},
		{"abcd", 3, "…", "ab…"},
		{"abc", 1, "…", "…"},
		{"abc", 0, "…", ""},
		{"abc", -2, "…", ""},
		{"ééééé", 4, "…", "ééé…"},
		{"ééééé", 5, "…", "ééééé"},
		{"abcdef", 5, "[cut]", "[cut]"},
		{"abcdef", 3, "[cut]", "abc"}, // the mark does not fit: left off
		{"a😀😀b", 3, "…", "a😀…"},
		{"ab\xff\xfecd", 4, "…", "ab\xff…"},
	}
	for _, tt := range tests {
		if got := RunesWithin(tt.s, tt.n, tt.mark); got != tt.want {
			t.Errorf("RunesWithin(%q, %d, %q) = %q, want %q", tt.s, tt.n, tt.mark, got, tt.want)
		}
	}
}

func TestBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    string
		n    int
		mark string
		want string
	}{
		{"", 0, "…", ""},
		{"abc", 3, "…", "abc"},
		{"abcd", 3, "…", "abc…"},
		{"abc", 0, "…", "…"},
		{"abc", -1, "…", "…"},
		{"abc", 2, "", "ab"},
		{"aé", 2, "…", "a…"},   // é is two bytes: not split
		{"aé", 3, "…", "aé"},   // exactly fits
		{"aéb", 3, "…", "aé…"}, // cut just after é
		{"a€", 2, "…", "a…"},   // € is three bytes: cut one into it
		{"a€", 3, "…", "a…"},   // two into it
		{"a😀b", 4, "", "a"},    // three into a four-byte rune
		{"a😀b", 5, "", "a😀"},
		{"日本語", 7, " (truncated)", "日本 (truncated)"},
		{"ab\xffcd", 3, "…", "ab\xff…"},                         // an invalid byte is kept
		{"a\xe2\x82x", 2, "…", "a\xe2…"},                        // a truncated sequence is bytes of its own
		{"a\xe2\x82x", 3, "", "a\xe2\x82"},                      // and may be cut anywhere
		{"\x80\x80\x80\x80\x80\x80", 4, "", "\x80\x80\x80\x80"}, // stray continuation bytes too
		{"a€\x80\x80", 3, "", "a"},
		{"a€\x80\x80", 5, "", "a€\x80"},
	}
	for _, tt := range tests {
		if got := Bytes(tt.s, tt.n, tt.mark); got != tt.want {
			t.Errorf("Bytes(%q, %d, %q) = %q, want %q", tt.s, tt.n, tt.mark, got, tt.want)
		}
	}
}

func TestBytesWithin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    string
		n    int
		mark string
		want string
	}{
		{"", 0, "…", ""},
		{"abcdef", 6, "…", "abcdef"},
		{"abcdefg", 6, "…", "abc…"}, // "…" is three bytes
		{"abcdefg", 3, "…", "…"},
		{"abcdefg", 2, "…", "ab"}, // the mark does not fit: left off
		{"abcdefg", 0, "…", ""},
		{"abcdefg", -1, "…", ""},
		{"aééé", 6, "…", "aé…"},
		{"aééé", 7, "…", "aééé"},
		{"éé€", 6, "…", "é…"},
		{"é€", 2, "…", "é"},
	}
	for _, tt := range tests {
		if got := BytesWithin(tt.s, tt.n, tt.mark); got != tt.want {
			t.Errorf("BytesWithin(%q, %d, %q) = %q, want %q", tt.s, tt.n, tt.mark, got, tt.want)
		}
	}
}

// TestBounds checks the package's guarantees on every n for strings mixing
// one- to four-byte runes and invalid bytes: the kept text is a prefix of s
// that ends where a for-range loop starts a rune, it is the longest such
// prefix within the bound, and the mark is there exactly when s was cut.
func TestBounds(t *testing.T) {
	t.Parallel()
	inputs := []string{"", "plain ascii", "aé€😀z", "😀😀😀", "é\xffe\xe2\x82\x80\x80\x80x", "\xf0\x9f\x98", "€\x80\x80\x80\x80€"}
	const mark = "[…]"
	for _, s := range inputs {
		starts := map[int]bool{len(s): true} // byte offsets where a rune starts, and the end
		var offsets []int                    // the same, in rune order
		for i := range s {
			starts[i] = true
			offsets = append(offsets, i)
		}
		offsets = append(offsets, len(s))
		for n := -1; n <= len(s)+1; n++ {
			for _, f := range []struct {
				name   string
				clip   func(string, int, string) string
				within bool
				size   func(string) int
			}{
				{"Runes", Runes, false, utf8.RuneCountInString},
				{"RunesWithin", RunesWithin, true, utf8.RuneCountInString},
				{"Bytes", Bytes, false, func(s string) int { return len(s) }},
				{"BytesWithin", BytesWithin, true, func(s string) int { return len(s) }},
			} {
				got := f.clip(s, n, mark)
				if f.size(s) <= max(n, 0) {
					if got != s {
						t.Errorf("%s(%q, %d) = %q, want s unchanged", f.name, s, n, got)
					}
					continue
				}
				kept, marked := strings.CutSuffix(got, mark)
				room := max(n, 0)
				if f.within && f.size(mark) <= n {
					room = n - f.size(mark)
				}
				if f.within && f.size(mark) > n {
					if marked {
						t.Errorf("%s(%q, %d) = %q: the mark does not fit, want it left off", f.name, s, n, got)
					}
					kept = got
				} else if !marked {
					t.Errorf("%s(%q, %d) = %q: cut without the mark", f.name, s, n, got)
				}
				if !strings.HasPrefix(s, kept) || !starts[len(kept)] {
					t.Errorf("%s(%q, %d) = %q: kept text is not a prefix ending on a rune start", f.name, s, n, got)
				}
				if f.size(kept) > room {
					t.Errorf("%s(%q, %d) = %q: keeps %d, above %d", f.name, s, n, got, f.size(kept), room)
				}
				for _, o := range offsets {
					if o > len(kept) && f.size(s[:o]) <= room {
						t.Errorf("%s(%q, %d) = %q: the prefix %q also fits", f.name, s, n, got, s[:o])
						break
					}
				}
			}
		}
	}
}
