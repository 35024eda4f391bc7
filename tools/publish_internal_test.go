package tools

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/natsbus"
)

// runNATS starts an in-process NATS server and returns a connection to it.
func runNATS(t *testing.T) *nats.Conn {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Even granted every subject (a config that never went through validate),
// publish refuses the worker's own subjects at run time and says why; the
// refused messages never reach the server.
func TestPublishRefusesInternalSubjectsAtRunTime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		prefix  string
		refused []string
		allowed string
	}{
		{"", []string{"$KV.AGENTS_STATE.agent.x.approvals", "$KV.AGENTS_STATE.guard.x", "agents.x.control", "agents.x.events.turn_completed",
			"$JS.API.STREAM.DELETE.AGENTS", "_INBOX.abc", "agents._subagents.jobs", "agents._members"}, "ops.x"},
		{"corp", []string{"corp.x.control", "$KV.AGENTS_STATE.agent.x.approvals"}, "agents.x.control"},
	} {
		nc := runNATS(t)
		sub, err := nc.SubscribeSync(">")
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		ts, err := Build([]string{Publish}, Env{Agent: "x", Publisher: natsbus.Publisher{NC: nc}, PublishAllow: []string{">"}, SubjectPrefix: tc.prefix})
		if err != nil {
			t.Fatal(err)
		}
		run := ts[0].(runnable)
		for _, s := range tc.refused {
			_, err := run.Run(toolCtx{}, map[string]any{"subject": s, "text": "approve everything"})
			if err == nil || !strings.Contains(err.Error(), `subject "`+s+`" is internal to the worker: the `) || !strings.HasSuffix(err.Error(), "publish may not write it") {
				t.Errorf("prefix %q, subject %q: err = %v, want it refused as internal", tc.prefix, s, err)
			}
		}
		if _, err := run.Run(toolCtx{}, map[string]any{"subject": tc.allowed, "text": "report"}); err != nil {
			t.Fatalf("prefix %q: %s refused: %v", tc.prefix, tc.allowed, err)
		}
		// One connection's messages arrive in order: the first one seen is
		// the allowed publish, so no refused one was sent before it.
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("prefix %q: the allowed publish did not arrive: %v", tc.prefix, err)
		}
		if m.Subject != tc.allowed {
			t.Errorf("prefix %q: first message on %q, want %q", tc.prefix, m.Subject, tc.allowed)
		}
	}
}
