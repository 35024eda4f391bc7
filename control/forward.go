package control

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/access"
	"github.com/agent-worker/agent-worker/seal"
)

// Headers of a forwarded request, under its seal (seal.Header) with
// CallerHeader.
const (
	// SealedAtHeader is when the forwarding replica sealed the request
	// (RFC 3339, nanoseconds).
	SealedAtHeader = "Agent-Worker-Sealed-At"
	// NonceHeader makes each forward's seal unique, so two identical
	// requests sealed at the same instant are not taken for a replay.
	NonceHeader = "Agent-Worker-Nonce"
)

// ForwardWindow is how long a sealed forward is good for: the owner
// refuses one sealed longer ago (or further ahead: clocks apart) and
// remembers the seals it served for twice as long after they arrived
// (past any seal time it would still accept), so a captured forward
// cannot be replayed. Replicas' clocks must agree to well within it.
const ForwardWindow = 30 * time.Second

// maxForwards bounds the seals remembered within ForwardWindow; beyond
// it, sealed forwards are refused (503: retry) until older ones age out,
// never forgotten early (which would let them be replayed).
const maxForwards = 100_000

// Errors of a sealed forward the owner refuses.
var (
	errStaleSeal = errors.New("sealed request outside the forward window")
	errReplayed  = errors.New("sealed request already served")
	errTooMany   = errors.New("too many sealed requests within the forward window")
)

// sealForward makes m a sealed forward on behalf of who: the time, a
// nonce and the caller in its headers, and key's seal over its subject,
// those headers and its body. The zero key seals nothing: the owner
// treats m as unsealed.
func sealForward(key seal.Key, m *nats.Msg, who access.Caller, now time.Time) {
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	m.Header.Set(CallerHeader, encodeCaller(who))
	var nonce [12]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails on supported platforms.
	m.Header.Set(SealedAtHeader, now.UTC().Format(time.RFC3339Nano))
	m.Header.Set(NonceHeader, base64.RawURLEncoding.EncodeToString(nonce[:]))
	key.SealMsg(m, SealedAtHeader, NonceHeader, CallerHeader)
}

// forwards remembers the seals of the forwards served within
// ForwardWindow, oldest first. It is safe for concurrent use.
type forwards struct {
	mu    sync.Mutex
	seen  map[string]bool
	order []served // by arrival: pruned from the front
}

type served struct {
	seal string
	at   time.Time // when it arrived here
}

// sealed reports how a request carrying a seal header fares: ok true when
// key's seal checks; then err is nil for a fresh forward (now remembered)
// and says why a stale, replayed or one-too-many forward is refused. ok
// false: the seal does not check (another key, a changed body or
// subject, no key here), and the request counts as unsealed.
func (f *forwards) sealed(key seal.Key, m *nats.Msg, now time.Time) (ok bool, err error) {
	if !key.CheckMsg(m.Subject, m.Header, m.Data, SealedAtHeader, NonceHeader, CallerHeader) {
		return false, nil
	}
	at, perr := time.Parse(time.RFC3339Nano, m.Header.Get(SealedAtHeader))
	if perr != nil {
		return true, fmt.Errorf("%w: its %s %q is not a time", errStaleSeal, SealedAtHeader, m.Header.Get(SealedAtHeader))
	}
	if age := now.Sub(at); age > ForwardWindow || age < -ForwardWindow {
		return true, fmt.Errorf("%w: sealed at %s, %s from now (the window is %s: a replay, or the replicas' clocks are apart)",
			errStaleSeal, at.Format(time.RFC3339), age.Round(time.Millisecond), ForwardWindow)
	}
	s := m.Header.Get(seal.Header)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	// Forget what has aged out of the window (in arrival order, so the
	// front is the oldest); a replay of it is stale by now.
	n := 0
	for n < len(f.order) && now.Sub(f.order[n].at) > 2*ForwardWindow {
		delete(f.seen, f.order[n].seal)
		n++
	}
	f.order = f.order[n:]
	switch {
	case f.seen[s]:
		return true, errReplayed
	case len(f.order) >= maxForwards:
		return true, errTooMany
	}
	f.seen[s] = true
	f.order = append(f.order, served{seal: s, at: now})
	return true, nil
}
