package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/seal"
)

// TestAnAnonymousClientOfTheEmbeddedServerCanOnlyPublish is what any
// local process (an MCP child, a stranger's script) sees of the embedded
// default's NATS without credentials: it can queue a message through
// JetStream (and have its ack) and read the events, and nothing else —
// no KV read, put or direct get of the state, no stream or consumer API,
// no control verb, no internal subject, no reading of the worker's own
// replies.
func TestAnAnonymousClientOfTheEmbeddedServerCanOnlyPublish(t *testing.T) {
	t.Parallel()
	r := start(t, writeConfig(t, setup{}), newRecorder(), nil)
	if !strings.Contains(r.w.NATS().ClientURL, "127.0.0.1") {
		t.Fatalf("embedded server at %s", r.w.NATS().ClientURL)
	}
	anon, err := nats.Connect(r.w.NATS().ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(anon)
	if err != nil {
		t.Fatal(err)
	}

	// What a publisher may do.
	events, err := anon.SubscribeSync("agents.*.events.>")
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg("agents.triage.inbox")
	msg.Data = []byte(`{"text":"disk full on db-1"}`)
	if ack, err := js.PublishMsg(ctx, msg); err != nil || ack.Stream == "" {
		t.Fatalf("a JetStream publish to the inbox: %+v, %v", ack, err)
	}
	if _, err := events.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("no event reached the anonymous subscriber: %v", err)
	}

	// What it may not: each refused by the server's permissions.
	denied := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: allowed, want a permissions violation", what)
		}
	}
	refusedAsync := func(what string, subscribe func() (*nats.Subscription, error)) {
		t.Helper()
		sub, err := subscribe()
		if err == nil {
			err = anon.Flush()
		}
		if err == nil {
			err = anon.LastError()
		}
		if err == nil && sub != nil {
			_, err = sub.NextMsg(200 * time.Millisecond) // a refused subscription is closed with the violation
			if errors.Is(err, nats.ErrTimeout) {
				err = nil
			}
		}
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Errorf("%s: %v, want a permissions violation", what, err)
		}
	}
	_, err = js.KeyValue(ctx, "agent-worker-state")
	denied("kv bind agent-worker-state", err)
	_, err = anon.Request("$JS.API.DIRECT.GET.KV_agent-worker-state.$KV.agent-worker-state.lease.triage", nil, time.Second)
	denied("direct get of a lease", err)
	_, err = anon.Request("$JS.API.STREAM.MSG.GET.KV_agent-worker-state", []byte(`{"last_by_subj":"$KV.agent-worker-state.lease.triage"}`), time.Second)
	denied("stream msg get", err)
	put := nats.NewMsg("$KV.agent-worker-state.pause.triage")
	put.Data = []byte(`{"by":"mallory"}`)
	_, err = js.PublishMsg(ctx, put)
	denied("kv put of a pause", err)
	_, err = js.Stream(ctx, "AGENTS")
	denied("stream info", err)
	_, err = anon.Request("agents.triage.control", []byte(`{"verb":"pause"}`), time.Second)
	denied("a control request", err)
	for _, subject := range []string{"agents._subagents.jobs", "agents._subagents.charges.triage", "agents.triage.dlq", "agents.triage.events.turn-completed"} {
		m := nats.NewMsg(subject)
		m.Data = []byte(`{}`)
		_, err := js.PublishMsg(ctx, m)
		denied("publish to "+subject, err)
	}
	for _, subject := range []string{natsbus.InboxPrefix + ".>", "$KV.>", "agents.*.control", "agents._subagents.>", "agents.*.dlq", ">"} {
		refusedAsync("subscribe to "+subject, func() (*nats.Subscription, error) { return anon.SubscribeSync(subject) })
	}

	// The worker still does all of it, its replies out of a publisher's
	// reach, and the queued message was handled.
	r.waitEvent("turn-completed")
	if r.w.NATS().NC.Opts.InboxPrefix != natsbus.InboxPrefix {
		t.Errorf("the worker's inbox prefix is %q, want %q", r.w.NATS().NC.Opts.InboxPrefix, natsbus.InboxPrefix)
	}
}

// TestTheSealKeyIsOutOfAPublishersReach: the embedded default keeps its
// seal key in data_dir/seal.key, mode 0600; the store does not hold it;
// a worker started on a store where an older worker kept it moves it out.
func TestTheSealKeyIsOutOfAPublishersReach(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, setup{dataDir: dir})
	cfg.Seal = config.Seal{} // the embedded default's own key
	r := start(t, cfg, newRecorder(), nil)
	file := filepath.Join(dir, "seal.key")
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatalf("no key file of its own: %v", err)
	}
	if fi.Mode().Perm() != seal.LocalFileMode {
		t.Errorf("key file mode %v", fi.Mode().Perm())
	}
	if _, err := r.w.Store().Get(t.Context(), seal.StoreKey); err == nil {
		t.Fatal("the store holds the seal key")
	}
	local, _, _, err := seal.LoadLocal(file)
	if err != nil {
		t.Fatal(err)
	}

	// An older worker's key in the store: the next start moves it out.
	raw := make([]byte, 32)
	copy(raw, "an older worker's key, 32 bytes!")
	if _, err := r.w.Store().Put(t.Context(), seal.StoreKey, raw); err != nil {
		t.Fatal(err)
	}
	r.stop()
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	r = start(t, cfg, newRecorder(), nil)
	if _, err := r.w.Store().Get(t.Context(), seal.StoreKey); err == nil {
		t.Fatal("the store still holds the older worker's key")
	}
	moved, _, _, err := seal.LoadLocal(file)
	if err != nil {
		t.Fatal(err)
	}
	if !moved.Equal(seal.NewKey(raw)) || moved.Equal(local) {
		t.Fatal("the older worker's key was not moved into the file")
	}
}

// TestAnOpenExternalServerIsReportedExposed: on an external nats-server
// with default permissions (no accounts), a client without credentials
// reads the state bucket: the worker starts, says so in an ERROR line
// (via the log's degraded list), in /readyz's degraded and in
// agent_worker_state_exposed. On the embedded default nothing is exposed.
func TestAnOpenExternalServerIsReportedExposed(t *testing.T) {
	t.Parallel()
	r := start(t, writeConfig(t, setup{natsURL: natsExternal(t)}), newRecorder(), nil)
	why := r.w.exposure()
	for _, want := range []string{"read the state bucket agent-worker-state", "read the control requests", "_AW_INBOX.>"} {
		if !strings.Contains(why, want) {
			t.Errorf("exposure %q does not name %q", why, want)
		}
	}
	if !slices.Contains(r.w.degraded(), why) {
		t.Errorf("degraded %q does not list the exposure", r.w.degraded())
	}
	r.metric("agent_worker_state_exposed", nil, 1)

	embedded := start(t, writeConfig(t, setup{}), newRecorder(), nil)
	if why := embedded.w.exposure(); why != "" {
		t.Errorf("the embedded server exposes: %s", why)
	}
	embedded.metric("agent_worker_state_exposed", nil, 0)
}

// TestTheDocsAccountsKeepPublishersOut runs the accounts example of
// docs/operations.md on a real nats-server: the worker connects as its
// user and works; a client without credentials and the publisher user
// queue messages through JetStream and read events, and can read none of
// the state; the worker finds nothing exposed.
func TestTheDocsAccountsKeepPublishersOut(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	const open = "```text\n# nats-server.conf: agent-worker's account\n"
	_, rest, ok := strings.Cut(string(doc), open)
	conf, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("docs/operations.md has no accounts example")
	}
	dir := t.TempDir()
	conf = strings.Replace(conf, "/data/jetstream", filepath.Join(dir, "js"), 1)
	path := filepath.Join(dir, "nats-server.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENT_WORKER_NATS_PASSWORD", "worker-secret")
	t.Setenv("PUBLISHER_NATS_PASSWORD", "publisher-secret")
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("the docs' nats-server.conf: %v", err)
	}
	opts.Host, opts.Port, opts.NoSigs, opts.NoLog = "127.0.0.1", -1, true, true
	ns := startNATSServer(t, opts)

	cfg := writeConfig(t, setup{natsURL: ns.ClientURL()})
	cfg.NATS.User, cfg.NATS.PasswordEnv = "agent-worker", "AGENT_WORKER_NATS_PASSWORD"
	r := start(t, cfg, newRecorder(), nil)
	if why := r.w.exposure(); why != "" {
		t.Fatalf("the docs' accounts expose: %s", why)
	}
	r.metric("agent_worker_state_exposed", nil, 0)

	for i, who := range []nats.Option{nats.Name("anonymous"), nats.UserInfo("publisher", "publisher-secret")} {
		nc, err := nats.Connect(ns.ClientURL(), who)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		m := nats.NewMsg("agents.triage.inbox")
		m.Data = []byte(`{"text":"from a publisher"}`)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("publisher %d: JetStream publish: %v", i, err)
		}
		r.waitEvent("turn-completed")
		if _, err := js.KeyValue(ctx, "agent-worker-state"); err == nil {
			t.Errorf("publisher %d binds the state bucket", i)
		}
		if _, err := nc.Request("$JS.API.DIRECT.GET.KV_agent-worker-state", []byte(`{"last_by_subj":"$KV.agent-worker-state.lease.triage"}`), time.Second); err == nil {
			t.Errorf("publisher %d reads the state bucket", i)
		}
	}
}
