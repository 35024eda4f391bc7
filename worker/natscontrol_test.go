package worker

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/seal"
)

// askControl sends a raw request on agent triage's control subject, as
// any NATS client could, with token in the Authorization header ("" for
// none), and returns the reply.
func askControl(t *testing.T, nc *nats.Conn, token, body string) control.Reply {
	t.Helper()
	m := nats.NewMsg("agents.triage.control")
	m.Data = []byte(body)
	if token != "" {
		m.Header.Set("Authorization", "Bearer "+token)
	}
	return requestControl(t, nc, m)
}

// requestControl sends m as a request and decodes the reply.
func requestControl(t *testing.T, nc *nats.Conn, m *nats.Msg) control.Reply {
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

// tokenFile writes a token's value to a file of dir and returns its path.
func tokenFile(t *testing.T, dir, name, value string) string {
	t.Helper()
	p := filepath.Join(dir, name+".token")
	if err := os.WriteFile(p, []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNATSControlNeedsATokenWhenTheAPIHasTokens: with api.tokens
// configured, a request on the control subject is checked like an API
// request: no Authorization header or an unknown token is 401 and the
// agent is not paused; a read token may view but not pause (403); an
// operate token for another agent is 403; an operate token pauses, and the
// pause and its event name the token, not the "by" the body claims. On
// the old code every request was carried out, by whatever "by" it said.
func TestNATSControlNeedsATokenWhenTheAPIHasTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opsFile := tokenFile(t, dir, "ops", "ops-secret-1")
	apiYAML := fmt.Sprintf(`
  listen: "127.0.0.1:0"
  tokens:
    - {name: ops, role: operate, value_file: %s}
    - {name: viewer, role: read, value_file: %s}
    - {name: other-ops, role: operate, agents: [other], value_file: %s}`,
		opsFile, tokenFile(t, dir, "viewer", "viewer-secret-2"), tokenFile(t, dir, "other", "other-secret-3"))
	r := start(t, writeConfig(t, setup{api: apiYAML, agent: "  - name: other\n    model: fake\n    tools: [report_done]"}), newRecorder(), nil)
	a := r.agent()
	wait.Within(t, deadline, "the worker owns triage", func() bool { return !a.Status().Standby })
	notPaused := func(after string) {
		t.Helper()
		if a.State() == driver.Paused {
			p, _ := a.PauseInfo()
			t.Fatalf("%s: the agent is paused (by %q)", after, p.By)
		}
	}

	rep := askControl(t, r.nc, "", `{"verb":"pause","by":"ops"}`)
	if rep.Status() != http.StatusUnauthorized || !strings.Contains(rep.Error, "Authorization: Bearer <token>") {
		t.Fatalf("pause without a token: code %d %q, want 401 naming the header", rep.Status(), rep.Error)
	}
	notPaused("pause without a token")
	if rep := askControl(t, r.nc, "not-a-token", `{"verb":"pause"}`); rep.Status() != http.StatusUnauthorized {
		t.Fatalf("pause with an unknown token: code %d %q, want 401", rep.Status(), rep.Error)
	}
	notPaused("pause with an unknown token")
	if rep := askControl(t, r.nc, "viewer-secret-2", `{"verb":"pause"}`); rep.Status() != http.StatusForbidden || !strings.Contains(rep.Error, `"operate"`) {
		t.Fatalf("pause with a read token: code %d %q, want 403", rep.Status(), rep.Error)
	}
	notPaused("pause with a read token")
	if rep := askControl(t, r.nc, "viewer-secret-2", `{"verb":"view"}`); rep.Status() != http.StatusOK || len(rep.Result) == 0 {
		t.Fatalf("view with a read token: code %d %q, want 200 with the view", rep.Status(), rep.Error)
	}
	if rep := askControl(t, r.nc, "other-secret-3", `{"verb":"pause"}`); rep.Status() != http.StatusForbidden || !strings.Contains(rep.Error, `"triage"`) {
		t.Fatalf("pause with an operate token for another agent: code %d %q, want 403", rep.Status(), rep.Error)
	}
	notPaused("pause with a token for another agent")

	if rep := askControl(t, r.nc, "ops-secret-1", `{"verb":"pause","by":"root","reason":"maintenance"}`); rep.Status() != http.StatusOK || rep.State != string(driver.Paused) {
		t.Fatalf("pause with an operate token: code %d %q", rep.Status(), rep.Error)
	}
	if p, ok := a.PauseInfo(); !ok || p.By != "ops" || p.Reason != "maintenance" {
		t.Fatalf("stored pause %+v, %v: want by ops (the token), not root (the body)", p, ok)
	}
	if e := r.waitEvent(events.Paused); e.Data["by"] != "ops" {
		t.Fatalf("paused event %v: want by ops", e.Data)
	}

	// A reload (SIGHUP) reaches the control subject as it does the API.
	tokenFile(t, dir, "ops", "ops-secret-rotated")
	if err := r.w.ReloadTokens(); err != nil {
		t.Fatal(err)
	}
	if rep := askControl(t, r.nc, "ops-secret-1", `{"verb":"resume"}`); rep.Status() != http.StatusUnauthorized {
		t.Fatalf("resume with the replaced token: code %d %q, want 401", rep.Status(), rep.Error)
	}
	if rep := askControl(t, r.nc, "ops-secret-rotated", `{"verb":"resume"}`); rep.Status() != http.StatusOK {
		t.Fatalf("resume with the reloaded token: code %d %q", rep.Status(), rep.Error)
	}
}

// TestNATSControlWithoutTokens: with no api.tokens, the embedded NATS
// server on loopback takes control requests from anyone on this machine,
// recorded by "anonymous"; a worker on an external NATS server refuses
// them (401), saying to configure api.tokens. On the old code both were
// carried out, by "nats".
func TestNATSControlWithoutTokens(t *testing.T) {
	t.Parallel()
	t.Run("embedded loopback", func(t *testing.T) {
		t.Parallel()
		r := start(t, writeConfig(t, setup{}), newRecorder(), nil)
		a := r.agent()
		wait.Within(t, deadline, "the worker owns triage", func() bool { return !a.Status().Standby })
		if rep := askControl(t, r.nc, "", `{"verb":"pause","by":"root"}`); rep.Status() != http.StatusOK {
			t.Fatalf("anonymous pause: code %d %q", rep.Status(), rep.Error)
		}
		if p, ok := a.PauseInfo(); !ok || p.By != "anonymous" {
			t.Fatalf("stored pause %+v, %v: want by anonymous", p, ok)
		}
	})
	t.Run("external NATS", func(t *testing.T) {
		t.Parallel()
		ns := runServer(t, freePort(t), t.TempDir())
		t.Cleanup(ns.Shutdown)
		r := start(t, writeConfig(t, setup{natsURL: ns.ClientURL()}), newRecorder(), nil)
		a := r.agent()
		wait.Within(t, deadline, "the worker owns triage", func() bool { return !a.Status().Standby })
		rep := askControl(t, r.nc, "", `{"verb":"pause"}`)
		if rep.Status() != http.StatusUnauthorized || !strings.Contains(rep.Error, "api.tokens") {
			t.Fatalf("pause on external NATS without tokens: code %d %q, want 401 naming api.tokens", rep.Status(), rep.Error)
		}
		if a.State() == driver.Paused {
			t.Fatal("the agent was paused by an anonymous request on external NATS")
		}
		// The API on loopback still works: it is the caller's door.
		if code, body := (&cluster{t: t, reps: map[string]*running{"r": r}}).call("r", http.MethodPost, "/v1/agents/triage/pause", ""); code != http.StatusOK {
			t.Fatalf("pause over the loopback API: %d %s", code, body)
		}
	})
}

// TestForwardedVerbsCannotBeForgedOrReplayed: a pause sent to the standby
// r2's API with alice's token is forwarded to the owner r1 sealed, and
// carried out by alice. A stranger on NATS who captured that forward
// cannot replay it, and a forward sealed with another key is treated as
// unsealed: without a token, both are refused (401) and the agent stays
// running. On the old code the owner trusted any "by" on the wire, so the
// replay paused the agent again and the forgery paused it "by alice".
func TestForwardedVerbsCannotBeForgedOrReplayed(t *testing.T) {
	t.Parallel()
	c := newAuditCluster(t)
	r1 := c.reps["r1"]
	stranger, err := nats.Connect(c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	sniff, err := stranger.SubscribeSync("agents.triage.control")
	if err != nil {
		t.Fatal(err)
	}
	if err := stranger.Flush(); err != nil {
		t.Fatal(err)
	}

	if code, body := c.call("r2", aliceToken, http.MethodPost, "/v1/agents/triage/pause", `{"reason": "deploy"}`); code != http.StatusOK || !strings.Contains(string(body), `"owner":"r1"`) {
		t.Fatalf("pause via r2: %d %s", code, body)
	}
	if e := r1.waitEvent(events.Paused); e.Data["by"] != "alice" {
		t.Fatalf("the owner's paused event %v: want by alice", e.Data)
	}
	var captured *nats.Msg
	for captured == nil {
		m, err := sniff.NextMsg(deadline)
		if err != nil {
			t.Fatalf("no forwarded pause on the control subject: %v", err)
		}
		if strings.Contains(string(m.Data), `"pause"`) {
			captured = m
		}
	}
	if code, body := c.call("r2", aliceToken, http.MethodPost, "/v1/agents/triage/resume", ""); code != http.StatusOK {
		t.Fatalf("resume via r2: %d %s", code, body)
	}
	wait.Within(t, deadline, "the owner resumed", func() bool { return r1.agent().State() != driver.Paused })

	replay := &nats.Msg{Subject: captured.Subject, Header: captured.Header, Data: captured.Data}
	if rep := requestControl(t, stranger, replay); rep.Status() != http.StatusUnauthorized {
		t.Fatalf("replayed forward: code %d %q, want 401", rep.Status(), rep.Error)
	}
	if r1.agent().State() == driver.Paused {
		t.Fatal("the replayed forward paused the agent again")
	}

	b := make([]byte, 32)
	_, _ = rand.Read(b)
	forged := &nats.Msg{Subject: captured.Subject, Header: nats.Header{}, Data: []byte(`{"verb":"pause","by":"alice","reason":"forged"}`)}
	for k, v := range captured.Header {
		forged.Header[k] = v
	}
	seal.NewKey(b).SealMsg(forged, "Agent-Worker-Sealed-At", "Agent-Worker-Nonce")
	if rep := requestControl(t, stranger, forged); rep.Status() != http.StatusUnauthorized {
		t.Fatalf("forward sealed with another key: code %d %q, want 401", rep.Status(), rep.Error)
	}
	if r1.agent().State() == driver.Paused {
		p, _ := r1.agent().PauseInfo()
		t.Fatalf("the forged forward paused the agent (by %q, %q)", p.By, p.Reason)
	}
}
