package worker

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/internal/fakeprovider"
)

// A wake that leaves a turn nothing to do costs no model call: a resume
// and a bare operator wake with nothing queued, and the retry of a failed
// turn whose message an operator dropped meanwhile, each end in a
// turn-skipped event with no request at the provider (an OpenAI-compatible
// httptest server); a message afterwards runs a turn as ever.
func TestWakeWithNothingToDoCallsNoModel(t *testing.T) {
	t.Parallel()
	prov := &fakeprovider.Provider{Subject: "ops.reports.db", Text: "cleaned"}
	srv := httptest.NewServer(prov)
	t.Cleanup(srv.Close)
	y := fmt.Sprintf(`data_dir: %s
shutdown_grace: 5s
api: {listen: "127.0.0.1:0"}
nats: {listen: "-1"}
models:
  main: {provider: openai, model: main-1, base_url: %s/v1, retry: {max: 0}}
agents:
  - name: triage
    model: main
    tools: [publish]
    publish: ["ops.reports.>"]
    turn: {retry: {base: 1h, max: 1h}}
`, t.TempDir(), srv.URL)
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	r := startReal(t, cfg)
	ag, err := r.w.Driver().Agent("triage")
	if err != nil {
		t.Fatal(err)
	}
	requests := func() int {
		first, second, refused := prov.Answered()
		return first + second + refused
	}
	skipped := func(what string) {
		t.Helper()
		e := r.waitEvent(events.TurnSkipped)
		if e.Data["reason"] != driver.SkipNothingToDo {
			t.Fatalf("%s: turn-skipped %v", what, e.Data)
		}
		if n := requests(); n != 0 {
			t.Fatalf("%s: %d provider requests, want none", what, n)
		}
	}

	ag.PauseAs(hook.Audit{By: "ops"}) // resume opens a pause; of an agent not paused it is refused
	if _, err := ag.ResumeAs(hook.Audit{By: "ops"}, "", false); err != nil {
		t.Fatal(err)
	}
	skipped("resume with nothing queued")
	ag.WakeAs(hook.Audit{By: "ops"}, "")
	skipped("bare wake with nothing queued")

	prov.Fail(503)
	r.publish("agents.triage.inbox", "disk full on db-1")
	if f := r.waitEvent(events.TurnFailed); f.Data["outcome"] != driver.OutcomeUnavailable {
		t.Fatalf("turn on a provider answering 503: %v", f.Data)
	}
	_, _, refused := prov.Answered()
	prov.Fail(0)
	// The operator drops the failed turn's message; the retry it left
	// (and the resume's own wake) find nothing to do.
	ag.PauseAs(hook.Audit{By: "ops"})
	if n, err := ag.ResumeAs(hook.Audit{By: "ops"}, "", true); err != nil || n != 1 {
		t.Fatalf("resume dropping the queued message: %d, %v", n, err)
	}
	e := r.waitEvent(events.TurnSkipped)
	if first, second, now := prov.Answered(); first+second != 0 || now != refused {
		t.Fatalf("the message-less retry reached the provider: %d+%d answers, %d refusals (%d before)", first, second, now, refused)
	}
	if wakes := fmt.Sprint(e.Data["wakes"]); wakes != "[retry after a failed turn operator]" {
		t.Fatalf("skipped wakes %s", wakes)
	}

	r.publish("agents.triage.inbox", "disk full on db-2")
	r.waitEvent(events.TurnCompleted)
	if first, second, _ := prov.Answered(); first != 1 || second != 1 {
		t.Fatalf("a message after the skips: %d+%d answers, want one turn of two steps", first, second)
	}
}
