// Package textclip cuts text to a length bound for logs, events, error
// messages, records and prompts, marking the cut. It is the one clipper of
// the module: every place that shortens text for display or storage calls
// it, so that all of them cut the same way. It only cuts; it does not
// collapse white space, escape, or repair text.
//
// Guarantees, for every function:
//
//   - A cut never splits a UTF-8 sequence: it falls where a for-range loop
//     over s starts a rune.
//   - Invalid UTF-8 is kept byte for byte, never replaced with U+FFFD; each
//     invalid byte counts as one rune, as in a for-range loop and
//     utf8.RuneCountInString.
//   - s that fits is returned unchanged, without the mark; the mark is added
//     only when something was cut. The mark is any text, "" for none.
//   - n < 0 counts as 0: nothing of s is kept, and "" stays "".
//
// Runes and Bytes bound what is kept of s: the mark comes on top, so the
// result is at most n runes (bytes) plus the mark. RunesWithin and
// BytesWithin bound the whole result, the mark included.
package textclip

import "unicode/utf8"

// Runes returns the first n runes of s followed by mark, or s when it has
// at most n runes.
func Runes(s string, n int, mark string) string {
	i := runePrefix(s, n)
	if i == len(s) {
		return s
	}
	return s[:i] + mark
}

// RunesWithin returns s when it has at most n runes, and otherwise as many
// of its first runes as leave room for mark, then mark, n runes in all.
// When mark alone is longer than n runes it is left off and s is cut to n
// runes.
func RunesWithin(s string, n int, mark string) string {
	i := runePrefix(s, n)
	if i == len(s) {
		return s
	}
	m := utf8.RuneCountInString(mark)
	if m > n {
		return s[:i]
	}
	return s[:runePrefix(s, n-m)] + mark
}

// Bytes returns the longest prefix of s of at most n bytes that ends on a
// rune boundary, followed by mark; or s when it is at most n bytes. The
// prefix is short of n by at most three bytes, the start of the rune that
// would have been split.
func Bytes(s string, n int, mark string) string {
	if len(s) <= max(n, 0) {
		return s
	}
	return s[:boundary(s, n)] + mark
}

// BytesWithin returns s when it is at most n bytes, and otherwise the
// longest prefix that ends on a rune boundary and leaves room for mark,
// then mark, at most n bytes in all. When mark alone is longer than n bytes
// it is left off and s is cut to n bytes.
func BytesWithin(s string, n int, mark string) string {
	if len(s) <= max(n, 0) {
		return s
	}
	if len(mark) > n {
		return s[:boundary(s, n)]
	}
	return s[:boundary(s, n-len(mark))] + mark
}

// runePrefix returns the length in bytes of the first n runes of s, len(s)
// when s has no more than n.
func runePrefix(s string, n int) int {
	if n <= 0 {
		return 0
	}
	count := 0
	for i := range s {
		if count == n {
			return i
		}
		count++
	}
	return len(s)
}

// boundary returns the largest i ≤ n (n < len(s)) at which a for-range loop
// over s starts a rune. Only a valid multi-byte rune spans several bytes,
// and it begins at most utf8.UTFMax-1 bytes before n; continuation bytes
// that belong to no such rune are runes of their own.
func boundary(s string, n int) int {
	if n <= 0 {
		return 0
	}
	for i := n; i >= 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if _, size := utf8.DecodeRuneInString(s[i:]); i+size > n {
				return i
			}
			return n
		}
	}
	return n
}
