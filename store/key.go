package store

import (
	"errors"
	"strings"
)

// ErrInvalidKey is returned, wrapped with the key, by a backend that
// refuses a key or list name ValidKey rejects. natskv and redisstore both
// enforce it, so a key that works on one backend works on the other; the
// keys agent-worker uses are always valid. memstore does not check keys.
var ErrInvalidKey = errors.New("invalid key: want dot-separated tokens of [A-Za-z0-9_=/-]")

// ValidKey reports whether key is a valid key or list name: NATS KV's own
// rule, which the Redis backend keeps too. A key is dot-separated tokens
// of [A-Za-z0-9_=/-]: not empty, not starting or ending with a dot, with
// no empty token ("a..b") and no other character (wildcards and spaces
// included).
func ValidKey(key string) bool {
	if key == "" || key[0] == '.' || key[len(key)-1] == '.' || strings.Contains(key, "..") {
		return false
	}
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '_', c == '=', c == '/', c == '.':
		default:
			return false
		}
	}
	return true
}
