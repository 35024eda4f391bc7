package natsbus

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"slices"
	"sync/atomic"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/agent-worker/agent-worker/natsbus/subject"
)

// WorkerUser is the user name of the worker's own connections to its
// embedded server; the password is made at start and kept in memory.
const WorkerUser = "agent-worker"

// InboxPrefix is the prefix of the worker's own reply subjects (its
// requests, KV reads, consumers' deliveries), on the embedded server and
// an external one alike. Publishers may subscribe to _INBOX.> for their
// own acks; they must not be able to read the worker's replies, so the
// worker's are elsewhere.
const InboxPrefix = subject.WorkerInboxPrefix

// Kinds of clients the embedded server tells apart, in its connection
// names (connz) and in the docs.
const (
	// KindWorker: the worker's own connections (WorkerUser): everything.
	KindWorker = "worker"
	// KindPublisher: a connection without credentials (on loopback), or
	// with the configured nats.token/user/nkey: publish input, read
	// events, and — with the configured credential only — send control
	// requests. No JetStream API, no KV, no internal subjects.
	KindPublisher = "publisher"
)

// clientAccess is the embedded server's authentication: it tells the
// worker's own connections (WorkerUser and the password made at start)
// from publishers (no credentials where allowed, or the configured
// credential) and gives each its permissions. It is safe for concurrent
// use: the server calls Check from its connection goroutines while
// AllowPublish changes the publishers' subjects.
type clientAccess struct {
	workerPassword string
	// configured is the credential nats.token/user/nkey names; zero:
	// none, and then anonymous connections are let in as publishers.
	token, user, password, nkey string
	anonymous                   bool
	prefix                      string
	extra                       atomic.Pointer[[]string] // subscribe: subjects publishers may publish to
	readable                    atomic.Pointer[[]string] // publish: subjects (the agents' output) publishers may read
}

func newClientAccess(prefix string) *clientAccess {
	pw := make([]byte, 32)
	_, _ = rand.Read(pw) // crypto/rand.Read never fails on supported platforms.
	a := &clientAccess{workerPassword: base64.RawURLEncoding.EncodeToString(pw), prefix: prefix}
	a.extra.Store(&[]string{})
	a.readable.Store(&[]string{})
	return a
}

// Check is server.Authentication: the worker's password gives the
// worker's permissions (all), the configured credential gives a
// publisher's with control, no credential (where allowed) a publisher's.
// Anything else is refused.
func (a *clientAccess) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	switch {
	case o.Username == WorkerUser:
		if !equal(o.Password, a.workerPassword) {
			return false
		}
		c.RegisterUser(&server.User{Username: WorkerUser})
		return true
	case a.token != "" && o.Token != "":
		if !equal(o.Token, a.token) {
			return false
		}
	case a.user != "" && o.Username != "":
		if o.Username != a.user || !equal(o.Password, a.password) {
			return false
		}
	case a.nkey != "" && o.Nkey != "":
		if o.Nkey != a.nkey || !verifyNonce(o.Nkey, c.GetNonce(), o.Sig) {
			return false
		}
	case o.Username == "" && o.Password == "" && o.Token == "" && o.Nkey == "" && o.JWT == "":
		if !a.anonymous {
			return false
		}
		c.RegisterUser(&server.User{Username: KindPublisher, Permissions: a.permissions(false)})
		return true
	default:
		return false
	}
	c.RegisterUser(&server.User{Username: KindPublisher, Permissions: a.permissions(true)})
	return true
}

// permissions are a publisher's: publish to every agent's inbox and
// deferred subjects and to the configured subscribe: subjects (with
// control: the control subjects too), subscribe to its own reply inboxes,
// the events and what the agents publish (their publish: subjects). Everything else is denied, $JS.API and $KV included: a
// JetStream publish needs only the subject and an _INBOX reply.
func (a *clientAccess) permissions(control bool) *server.Permissions {
	pub := []string{a.prefix + ".*.inbox", a.prefix + ".*.deferred"}
	pub = append(pub, *a.extra.Load()...)
	if control {
		pub = append(pub, a.prefix+".*.control")
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: append([]string{"_INBOX.>", a.prefix + ".*.events.>"}, *a.readable.Load()...)},
	}
}

// allow sets the subscribe: subjects publishers may publish to and the
// publish: subjects they may read, for connections made from now on, and
// reports whether they changed.
func (a *clientAccess) allow(publish, read []string) bool {
	p, r := sortedSet(publish), sortedSet(read)
	oldP, oldR := a.extra.Swap(&p), a.readable.Swap(&r)
	return !slices.Equal(*oldP, p) || !slices.Equal(*oldR, r)
}

func sortedSet(subjects []string) []string {
	s := slices.Clone(subjects)
	slices.Sort(s)
	return slices.Compact(s)
}

func equal(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// verifyNonce reports whether sig is the nonce signed by the NKey pub.
func verifyNonce(pub string, nonce []byte, sig string) bool {
	kp, err := nkeys.FromPublicKey(pub)
	if err != nil {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		if raw, err = base64.StdEncoding.DecodeString(sig); err != nil {
			return false
		}
	}
	return kp.Verify(nonce, raw) == nil
}

// Allow sets the subjects, beyond the inbox and deferred ones, that
// publishers may publish to on the embedded server (the agents'
// subscribe: subjects), and those beyond the events they may read (the
// agents' publish: subjects: their output). A server's permissions are a connection's from
// its start, so when they change the publishers connected now are
// disconnected (logged, with their count): a client reconnects, as NATS
// clients do, with the new permissions, its publishes buffered meanwhile.
// No-op for an external server, whose permissions its operator configures.
func (c *Conn) Allow(publish, read []string) {
	if c.access == nil || !c.access.allow(publish, read) || c.server == nil {
		return
	}
	conns, err := c.server.Connz(&server.ConnzOptions{Username: true, Limit: 1 << 20})
	if err != nil {
		c.log.Warn("publishers not reconnected: they keep their permissions until they reconnect", "error", err)
		return
	}
	n := 0
	for _, ci := range conns.Conns {
		if ci.AuthorizedUser == KindPublisher && c.server.DisconnectClientByID(ci.Cid) == nil {
			n++
		}
	}
	if n > 0 {
		c.log.Info("publishers reconnected to take the new subscribe: subjects", "publishers", n)
	}
}
