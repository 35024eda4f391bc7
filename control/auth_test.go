package control_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/access"
	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/seal"
)

// Tokens of the control tests.
var controlTokens = []access.Token{
	{Name: "ops", Role: access.RoleOperate, Value: "ops-secret"},
	{Name: "viewer", Role: access.RoleRead, Value: "viewer-secret"},
	{Name: "am", Role: access.RoleIngest, Value: "ingest-secret"},
	{Name: "beta-ops", Role: access.RoleOperate, Value: "beta-ops-secret", Agents: []string{"be*"}},
}

func tokenSet(t *testing.T, tokens []access.Token) *access.Tokens {
	t.Helper()
	set, err := access.NewSet(tokens)
	if err != nil {
		t.Fatal(err)
	}
	return access.NewTokens(set)
}

// send sends m as a request and decodes the reply.
func send(t *testing.T, nc *nats.Conn, m *nats.Msg) control.Reply {
	t.Helper()
	resp, err := nc.RequestMsg(m, deadline)
	if err != nil {
		t.Fatalf("request on %s: %v", m.Subject, err)
	}
	var r control.Reply
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		t.Fatalf("reply %q: %v", resp.Data, err)
	}
	return r
}

// withToken is a raw request for agent carrying token ("" for none).
func withToken(agent, token string, req control.Request) *nats.Msg {
	m := nats.NewMsg(subjects.Control(agent))
	m.Data, _ = json.Marshal(req)
	if token != "" {
		m.Header.Set("Authorization", "Bearer "+token)
	}
	return m
}

// TestVerbsNeedTheRolesTheAPIRoutesNeed: on the control subject, a read
// token may use exactly the verbs that change nothing (view, inbox,
// message, memory, approvals), an ingest token none, an operate token
// all; every other verb (and one nobody knows) needs operate. The API
// registers its routes for the verbs with the same Need.
func TestVerbsNeedTheRolesTheAPIRoutesNeed(t *testing.T) {
	t.Parallel()
	reads := map[string]bool{control.VerbView: true, control.VerbInbox: true, control.VerbMessage: true, control.VerbMemory: true, control.VerbApprovals: true}
	verbs := []string{control.VerbPause, control.VerbResume, control.VerbInterrupt, control.VerbWake, control.VerbReset, control.VerbRunSchedule,
		control.VerbView, control.VerbInbox, control.VerbMessage, control.VerbMemory, control.VerbMemoryCompact, control.VerbMemoryClear,
		control.VerbApprovals, control.VerbApprove, control.VerbDeny, "dance"}
	for _, v := range verbs {
		want := access.Operate
		if reads[v] {
			want = access.Read
		}
		if got := control.Need(v); got != want {
			t.Errorf("Need(%q) = %v, want %v", v, got, want)
		}
	}
	url := runNATS(t)
	tokens := tokenSet(t, controlTokens)
	newReplicaWith(t, url, "replica-a", true, func(o *control.Options) { o.Tokens = tokens }, "alpha", "beta")
	nc := connect(t, url)
	for _, v := range verbs {
		req := control.Request{Verb: v, Guardrail: "session_usd", Schedule: "nightly", ApprovalID: "x", MessageID: "m"}
		r := send(t, nc, withToken("beta", "viewer-secret", req))
		if reads[v] == (r.Status() == http.StatusForbidden) {
			t.Errorf("%s with a read token: %d %q", v, r.Status(), r.Error)
		}
		if r.Status() == http.StatusForbidden && !strings.Contains(r.Error, `token "viewer" has role "read"; verb "`+v+`" needs role "operate"`) {
			t.Errorf("%s with a read token: 403 %q", v, r.Error)
		}
		if r := send(t, nc, withToken("beta", "ingest-secret", req)); r.Status() != http.StatusForbidden {
			t.Errorf("%s with an ingest token: %d %q, want 403", v, r.Status(), r.Error)
		}
		if r := send(t, nc, withToken("alpha", "beta-ops-secret", req)); r.Status() != http.StatusForbidden || !strings.Contains(r.Error, `may not act on agent "alpha"`) {
			t.Errorf("%s on alpha with a token for be*: %d %q, want 403", v, r.Status(), r.Error)
		}
	}
}

// TestNATSControlSeesTheTokensInForce: the Control checks each request
// against the set its Tokens hold now: once the set is replaced (as the
// API's SetTokens does on SIGHUP), the old value is 401 and the new one
// pauses, by the token's name, not the body's.
func TestNATSControlSeesTheTokensInForce(t *testing.T) {
	t.Parallel()
	url := runNATS(t)
	tokens := tokenSet(t, controlTokens)
	a := newReplicaWith(t, url, "replica-a", true, func(o *control.Options) { o.Tokens = tokens }, "alpha")
	nc := connect(t, url)
	set, err := access.NewSet([]access.Token{{Name: "ops", Role: access.RoleOperate, Value: "rotated-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	tokens.Replace(set)
	if r := send(t, nc, withToken("alpha", "ops-secret", control.Request{Verb: control.VerbPause})); r.Status() != http.StatusUnauthorized || r.Error != "invalid bearer token" {
		t.Fatalf("pause with the replaced token: %d %q, want 401", r.Status(), r.Error)
	}
	if r := send(t, nc, withToken("alpha", "", control.Request{Verb: control.VerbPause})); r.Status() != http.StatusUnauthorized ||
		r.Error != "missing bearer token: send the NATS header Authorization: Bearer <token>" {
		t.Fatalf("pause without a token: %d %q, want 401", r.Status(), r.Error)
	}
	if r := send(t, nc, withToken("alpha", "rotated-secret", control.Request{Verb: control.VerbPause, By: "root"})); !r.OK {
		t.Fatalf("pause with the new token: %d %q", r.Status(), r.Error)
	}
	if p, ok := a.agent(t, "alpha").PauseInfo(); !ok || p.By != "ops" {
		t.Fatalf("pause %+v, %v: want by ops", p, ok)
	}
}

// TestNoTokensBeyondLoopbackRefusesAnonymous: without tokens and without
// LoopbackNATS (an external server), a request without a token is 401,
// saying to configure api.tokens; the agent is not paused.
func TestNoTokensBeyondLoopbackRefusesAnonymous(t *testing.T) {
	t.Parallel()
	url := runNATS(t)
	a := newReplicaWith(t, url, "replica-a", true, func(o *control.Options) { o.LoopbackNATS = false }, "alpha")
	r := send(t, connect(t, url), withToken("alpha", "", control.Request{Verb: control.VerbPause}))
	if r.Status() != http.StatusUnauthorized || !strings.Contains(r.Error, "add a token to api.tokens") || !strings.Contains(r.Error, "Authorization: Bearer <token>") {
		t.Fatalf("anonymous pause beyond loopback: %d %q", r.Status(), r.Error)
	}
	if a.agent(t, "alpha").State() == driver.Paused {
		t.Fatal("paused")
	}
}

// sealedAt is a request for agent sealed with key as a forward sealed at
// at, nonce nonce.
func sealedAt(key seal.Key, agent string, req control.Request, at time.Time, nonce string) *nats.Msg {
	return sealedBy(key, agent, req, at, nonce, `{"name":"alice","role":"operate"}`)
}

// sealedBy is sealedAt with the caller header's value ("" for none).
func sealedBy(key seal.Key, agent string, req control.Request, at time.Time, nonce, caller string) *nats.Msg {
	m := nats.NewMsg(subjects.Control(agent))
	m.Data, _ = json.Marshal(req)
	m.Header.Set(control.SealedAtHeader, at.UTC().Format(time.RFC3339Nano))
	m.Header.Set(control.NonceHeader, nonce)
	if caller != "" {
		m.Header.Set(control.CallerHeader, caller)
	}
	key.SealMsg(m, control.SealedAtHeader, control.NonceHeader, control.CallerHeader)
	return m
}

// TestAForwardIsAuthorisedAgainByTheOwner: a seal proves that a replica
// sent the request, not that any verb is allowed. The owner checks the
// role and the agents of the caller the forward names, as it would its
// own caller's: a read caller cannot pause, a caller scoped to be* cannot
// touch alpha, and a sealed forward that names no caller (what anyone
// holding the key could send) is refused. The by is the named caller's.
func TestAForwardIsAuthorisedAgainByTheOwner(t *testing.T) {
	t.Parallel()
	url := runNATS(t)
	tokens := tokenSet(t, controlTokens)
	a := newReplicaWith(t, url, "replica-a", true, func(o *control.Options) { o.Tokens = tokens }, "alpha")
	b := newReplicaWith(t, url, "replica-b", true, func(o *control.Options) { o.Tokens = tokens })
	alpha := a.agent(t, "alpha")

	viewer := control.WithCaller(t.Context(), access.Caller{Name: "viewer", Role: access.RoleRead})
	if r, err := b.ctl.Do(viewer, "alpha", control.Request{Verb: control.VerbPause}); err != nil || r.Status() != http.StatusForbidden || !strings.Contains(r.Error, `"viewer"`) {
		t.Fatalf("pause forwarded for a read caller: %+v, %v; want 403 naming viewer", r, err)
	}
	if r, err := b.ctl.Do(viewer, "alpha", control.Request{Verb: control.VerbView}); err != nil || !r.OK {
		t.Fatalf("view forwarded for a read caller: %+v, %v", r, err)
	}
	scoped := control.WithCaller(t.Context(), access.Caller{Name: "beta-ops", Role: access.RoleOperate, Agents: []string{"be*"}})
	if r, err := b.ctl.Do(scoped, "alpha", control.Request{Verb: control.VerbPause}); err != nil || r.Status() != http.StatusForbidden {
		t.Fatalf("pause of alpha forwarded for a caller scoped to be*: %+v, %v; want 403", r, err)
	}
	if _, err := b.ctl.Do(t.Context(), "alpha", control.Request{Verb: control.VerbPause}); err == nil {
		t.Fatal("Do forwarded a verb without a caller")
	}

	nc := connect(t, url)
	for name, caller := range map[string]string{
		"no caller":      "",
		"not JSON":       "operate",
		"no known role":  `{"name":"mallory","role":"root"}`,
		"no caller name": `{"role":"operate"}`,
	} {
		r := send(t, nc, sealedBy(testKey, "alpha", control.Request{Verb: control.VerbPause, By: "mallory"}, time.Now(), name, caller))
		if r.Status() != http.StatusUnauthorized {
			t.Errorf("sealed pause with %s: %d %q, want 401", name, r.Status(), r.Error)
		}
	}
	if alpha.State() == driver.Paused {
		t.Fatal("a forward the owner should have refused paused the agent")
	}

	sub := a.driver.Events().Subscribe(100, nil)
	defer sub.Close()
	if r := send(t, nc, sealedBy(testKey, "alpha", control.Request{Verb: control.VerbPause, By: "mallory"}, time.Now(), "ops", `{"name":"ops","role":"operate"}`)); !r.OK {
		t.Fatalf("sealed pause for ops: %d %q", r.Status(), r.Error)
	}
	if e := nextEvent(t, sub, events.Paused); e.Data["by"] != "ops" {
		t.Fatalf("paused by %v, want the forwarded caller ops (not the body's by)", e.Data["by"])
	}
}

// TestSealedForwardsAreTrustedOnceWithinTheWindow: with tokens
// configured, a verb forwarded by a replica of the same deployment (same
// key) is carried out by the caller it names, without a token. A replica
// with another key is refused (401: its forward counts as unsealed, and
// carries no token). A sealed request is good once: sent again it is 401;
// sealed longer than ForwardWindow ago, or that far ahead, it is 401.
func TestSealedForwardsAreTrustedOnceWithinTheWindow(t *testing.T) {
	t.Parallel()
	url := runNATS(t)
	tokens := tokenSet(t, controlTokens)
	a := newReplicaWith(t, url, "replica-a", true, func(o *control.Options) { o.Tokens = tokens }, "alpha")
	b := newReplicaWith(t, url, "replica-b", true, func(o *control.Options) { o.Tokens = tokens })
	stranger := newReplicaWith(t, url, "replica-x", false, func(o *control.Options) {
		o.Tokens, o.Seal = tokens, seal.NewKey([]byte("another deployment's sealing key"))
	})
	sub := a.driver.Events().Subscribe(100, nil)
	defer sub.Close()
	alpha := a.agent(t, "alpha")

	if r, err := b.ctl.Do(as(t.Context(), "alice"), "alpha", control.Request{Verb: control.VerbPause, By: "alice", Reason: "deploy"}); err != nil || !r.OK {
		t.Fatalf("pause forwarded by b: %+v, %v", r, err)
	}
	if e := nextEvent(t, sub, events.Paused); e.Data["by"] != "alice" {
		t.Fatalf("paused event %v: want by alice", e.Data)
	}
	if r, err := b.ctl.Do(as(t.Context(), "alice"), "alpha", control.Request{Verb: control.VerbResume, By: "alice"}); err != nil || !r.OK {
		t.Fatalf("resume forwarded by b: %+v, %v", r, err)
	}

	if r, err := stranger.ctl.Do(as(t.Context(), "alice"), "alpha", control.Request{Verb: control.VerbPause, By: "alice"}); err != nil || r.Status() != http.StatusUnauthorized {
		t.Fatalf("pause forwarded with another key: %+v, %v; want 401", r, err)
	}
	if alpha.State() == driver.Paused {
		t.Fatal("a forward sealed with another key paused the agent")
	}

	nc := connect(t, url)
	now := time.Now()
	for _, c := range []struct {
		name string
		at   time.Time
	}{
		{"sealed too long ago", now.Add(-control.ForwardWindow - time.Second)},
		{"sealed too far ahead", now.Add(control.ForwardWindow + time.Second)},
	} {
		r := send(t, nc, sealedAt(testKey, "alpha", control.Request{Verb: control.VerbPause, By: "alice"}, c.at, c.name))
		if r.Status() != http.StatusUnauthorized || !strings.Contains(r.Error, "outside the forward window") {
			t.Fatalf("%s: %d %q, want 401", c.name, r.Status(), r.Error)
		}
	}
	if alpha.State() == driver.Paused {
		t.Fatal("a stale forward paused the agent")
	}

	fresh := sealedAt(testKey, "alpha", control.Request{Verb: control.VerbInterrupt, By: "alice"}, now, "once")
	if r := send(t, nc, fresh); !r.OK {
		t.Fatalf("fresh sealed interrupt: %d %q", r.Status(), r.Error)
	}
	if e := nextEvent(t, sub, events.Interrupted); e.Data["by"] != "alice" {
		t.Fatalf("interrupted event %v", e.Data)
	}
	if r, err := b.ctl.Do(as(t.Context(), "alice"), "alpha", control.Request{Verb: control.VerbResume, By: "alice"}); err != nil || !r.OK {
		t.Fatalf("resume forwarded by b: %+v, %v", r, err)
	}
	again := &nats.Msg{Subject: fresh.Subject, Header: fresh.Header, Data: fresh.Data}
	if r := send(t, nc, again); r.Status() != http.StatusUnauthorized || !strings.Contains(r.Error, "already served") {
		t.Fatalf("the same sealed interrupt again: %d %q, want 401", r.Status(), r.Error)
	}
	if alpha.State() == driver.Paused {
		t.Fatal("the replayed interrupt held the agent again")
	}
}

// TestTheAuditNamesTheCredentialNotTheClaim: a verb on the control
// subject is done by its credential's name, whatever by its body claims:
// the token ops pauses as ops, and without tokens (NATS on loopback) a
// request is by "anonymous" — in the paused event and the stored pause
// alike. A by that stood would let any publisher pin its act on someone
// else.
func TestTheAuditNamesTheCredentialNotTheClaim(t *testing.T) {
	t.Parallel()
	url := runNATS(t)
	open := newReplica(t, url, "replica-a", true, "alpha")
	tokened := newReplicaWith(t, url, "replica-b", true, func(o *control.Options) { o.Tokens = tokenSet(t, controlTokens) }, "beta")
	nc := connect(t, url)
	for _, c := range []struct {
		r            *replica
		agent, token string
		want         string
	}{
		{open, "alpha", "", control.ByAnonymous},
		{tokened, "beta", "ops-secret", "ops"},
	} {
		sub := c.r.driver.Events().Subscribe(100, nil)
		if r := send(t, nc, withToken(c.agent, c.token, control.Request{Verb: control.VerbPause, By: "root", Reason: "not me"})); !r.OK {
			t.Fatalf("pause %s: %d %q", c.agent, r.Status(), r.Error)
		}
		if e := nextEvent(t, sub, events.Paused); e.Data["by"] != c.want {
			t.Fatalf("paused event of %s by %v, want %q", c.agent, e.Data["by"], c.want)
		}
		if p, ok := c.r.agent(t, c.agent).PauseInfo(); !ok || p.By != c.want {
			t.Fatalf("stored pause of %s %+v, want by %q", c.agent, p, c.want)
		}
		sub.Close()
	}
}
