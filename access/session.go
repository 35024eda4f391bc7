package access

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Errors Resume returns. Both mean "log in again"; they differ only in
// what the login form tells the user.
var (
	// ErrSessionExpired: the session was genuine but its time is up.
	ErrSessionExpired = errors.New("session expired")
	// ErrSessionInvalid: the session is not one the set in force signed —
	// malformed, altered, or signed with a token value that is no longer
	// in force (the token was removed or its value rotated).
	ErrSessionInvalid = errors.New("session not valid: its token was rotated or removed, or it was altered")
)

// sessionPrefix versions the session format, so that a change of it
// invalidates old sessions instead of misreading them.
const sessionPrefix = "s1"

// Domain separation of the keys and MACs derived from a token's value:
// no MAC of one kind can pass for another, nor for the token itself.
const (
	sessionKeyLabel = "agent-worker/access/session-key/v1"
	sessionMACLabel = "session\x00"
	csrfMACLabel    = "csrf\x00"
)

// sessionKeyOf derives the key that signs a token's sessions from its
// value. It is a one-way function of the value: a session or CSRF token
// reveals neither the key nor the value, and a new value makes a new key.
func sessionKeyOf(value string) [sha256.Size]byte {
	m := hmac.New(sha256.New, []byte(value))
	m.Write([]byte(sessionKeyLabel))
	var k [sha256.Size]byte
	copy(k[:], m.Sum(nil))
	return k
}

// Session returns a session for who, good until expires: an opaque
// string, safe as a cookie value, that names who's token and the expiry
// and carries an HMAC-SHA256 over both, keyed by a key derived from the
// token's value. It holds neither the value nor anything from which the
// value could be computed.
//
// A session is stateless: any holder of the same token set (every
// replica) can Resume it, and nothing needs to be stored or shared. It
// cannot be revoked on its own before it expires; rotating the token's
// value (or removing the token) ends all of that token's sessions.
//
// who must have been authenticated by a token (Authenticate or Resume);
// the anonymous caller has no token to sign with and gets an error.
func (s *Set) Session(who Caller, expires time.Time) (string, error) {
	if who.cred == nil {
		return "", fmt.Errorf("caller %q has no token to sign a session with", who.Name)
	}
	name := base64.RawURLEncoding.EncodeToString([]byte(who.cred.name))
	exp := strconv.FormatInt(expires.Unix(), 10)
	mac := sessionMAC(who.cred, who.cred.name, expires.Unix())
	return sessionPrefix + "." + name + "." + exp + "." + base64.RawURLEncoding.EncodeToString(mac), nil
}

// Resume returns the caller a session stands for at now: the caller its
// token would authenticate as in this set — the token's current role and
// agents, bound to this set so that Caller.ValidIn ends it on a rotation.
// It looks the token up by name and recomputes the MAC with the key of
// the value in force (compared in constant time), and then checks the
// expiry: ErrSessionInvalid for a malformed or altered session or one
// whose token is no longer in force with the value that signed it,
// ErrSessionExpired for a genuine one past its expiry.
func (s *Set) Resume(session string, now time.Time) (Caller, error) {
	parts := strings.Split(session, ".")
	if len(parts) != 4 || parts[0] != sessionPrefix {
		return Caller{}, ErrSessionInvalid
	}
	rawName, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return Caller{}, ErrSessionInvalid
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || strconv.FormatInt(exp, 10) != parts[2] {
		return Caller{}, ErrSessionInvalid // one spelling only: no two strings sign alike
	}
	mac, err := base64.RawURLEncoding.DecodeString(parts[3])
	if err != nil {
		return Caller{}, ErrSessionInvalid
	}
	name := string(rawName)
	var found *credential
	for i := range s.creds {
		c := &s.creds[i]
		if c.name == name && hmac.Equal(mac, sessionMAC(c, name, exp)) && found == nil {
			found = c
		}
	}
	if found == nil {
		return Caller{}, ErrSessionInvalid
	}
	if !now.Before(time.Unix(exp, 0)) {
		return Caller{}, ErrSessionExpired
	}
	return Caller{Name: found.name, Role: found.role, Agents: found.agents, set: s, cred: found}, nil
}

// sessionMAC signs (name, expiry) with c's session key; the name is
// length-prefixed so that no two (name, expiry) pairs sign alike.
func sessionMAC(c *credential, name string, expires int64) []byte {
	m := hmac.New(sha256.New, c.sessionKey[:])
	var n [8]byte
	m.Write([]byte(sessionMACLabel))
	binary.BigEndian.PutUint64(n[:], uint64(len(name)))
	m.Write(n[:])
	m.Write([]byte(name))
	binary.BigEndian.PutUint64(n[:], uint64(expires))
	m.Write(n[:])
	return m.Sum(nil)
}

// CSRF returns the anti-forgery token of session for c: an HMAC of the
// session keyed like it, so any replica can check it and it ends with the
// session. "" when c has no token (the anonymous caller).
func (c Caller) CSRF(session string) string {
	if c.cred == nil {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(csrfMAC(c.cred, session))
}

// CheckCSRF reports whether presented is session's anti-forgery token for
// c, compared in constant time; always false for a caller without a token
// or an empty presented token.
func (c Caller) CheckCSRF(session, presented string) bool {
	if c.cred == nil || presented == "" {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(presented)
	if err != nil {
		return false
	}
	return hmac.Equal(got, csrfMAC(c.cred, session))
}

func csrfMAC(c *credential, session string) []byte {
	m := hmac.New(sha256.New, c.sessionKey[:])
	m.Write([]byte(csrfMACLabel))
	m.Write([]byte(session))
	return m.Sum(nil)
}
