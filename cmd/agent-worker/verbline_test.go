package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestVerbsPrintALine: pause, resume, interrupt, wake and dlq replay print
// one line for a person, built from the API's answer, and -o json prints
// the answer itself. On the old code each printed the answer's raw JSON,
// "code": 200 included.
func TestVerbsPrintALine(t *testing.T) {
	t.Parallel()
	answers := map[string]string{
		"/v1/agents/oncall/pause":         `{"ok": true, "agent": "oncall", "verb": "pause", "state": "paused", "code": 200, "owner": "w-1"}`,
		"/v1/agents/oncall/resume":        `{"ok": true, "agent": "oncall", "verb": "resume", "state": "running", "dropped": 2, "code": 200, "owner": "w-1"}`,
		"/v1/agents/oncall/interrupt":     `{"ok": true, "agent": "oncall", "verb": "interrupt", "state": "paused", "turn_running": true, "code": 200, "owner": "w-1"}`,
		"/v1/agents/quiet/interrupt":      `{"ok": true, "agent": "quiet", "verb": "interrupt", "state": "sleeping", "turn_running": false, "code": 200, "owner": "w-2"}`,
		"/v1/agents/oncall/wake":          `{"ok": true, "agent": "oncall", "verb": "wake", "state": "running", "code": 200, "owner": "w-1"}`,
		"/v1/agents/oncall/dlq/42/replay": `{"replayed": true, "dead_letter": {"seq": 42, "agent": "oncall", "id": "disk-1", "reason": "operator_dropped", "at": "2026-05-04T10:00:00Z", "body": "x", "bytes": 1}}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answers[r.URL.Path]))
	}))
	t.Cleanup(srv.Close)
	env := testEnv(nil)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pause", "oncall", "--reason", "db migration"}, "oncall: paused on w-1 (reason: db migration); messages stay queued until resume\n"},
		{[]string{"resume", "oncall", "--drop-queued"}, "oncall: resumed on w-1, now running; 2 queued message(s) dropped (dead-lettered as operator_dropped)\n"},
		{[]string{"interrupt", "oncall"}, "oncall: turn cancelled and paused on w-1; resume runs it again\n"},
		{[]string{"interrupt", "quiet", "--no-hold"}, "quiet: no turn was running on w-2; nothing cancelled, not paused\n"},
		{[]string{"wake", "oncall", "--reason", "check now"}, "oncall: woken on w-1 (reason: check now), now running\n"},
		{[]string{"dlq", "replay", "oncall", "42"}, "oncall: dead letter 42 (id disk-1, operator_dropped) replayed to the inbox\n"},
	} {
		out, errs, code := run(env, append(c.args, "--api", srv.URL)...)
		if code != exitOK || out != c.want {
			t.Errorf("%v: exit %d, printed\n%q\nwant\n%q\nstderr: %s", c.args, code, out, c.want, errs)
		}
	}
	out, errs, code := run(env, "pause", "oncall", "-o", "json", "--api", srv.URL)
	if code != exitOK || !strings.Contains(out, `"code": 200`) || !strings.Contains(out, `"state": "paused"`) {
		t.Errorf("pause -o json: exit %d, printed\n%s\nstderr: %s", code, out, errs)
	}
	out, errs, code = run(env, "dlq", "replay", "oncall", "42", "-o", "json", "--api", srv.URL)
	if code != exitOK || !strings.Contains(out, `"replayed": true`) {
		t.Errorf("dlq replay -o json: exit %d, printed\n%s\nstderr: %s", code, out, errs)
	}
	if _, errs, code := run(env, "wake", "oncall", "-o", "yaml", "--api", srv.URL); code != exitConfig {
		t.Errorf("wake -o yaml: exit %d (want %d): %s", code, exitConfig, errs)
	}
}
