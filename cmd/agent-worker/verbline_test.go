package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestVerbsPrintALine: pause, resume, interrupt, wake, dlq replay,
// schedule run, reset, approve and deny print
// one line for a person, built from the API's answer, and -o json prints
// the answer itself. On the old code each printed the answer's raw JSON,
// "code": 200 included.
func TestVerbsPrintALine(t *testing.T) {
	t.Parallel()
	answers := map[string]string{
		"/v1/agents/oncall/pause":                  `{"ok": true, "agent": "oncall", "verb": "pause", "state": "paused", "code": 200, "owner": "w-1"}`,
		"/v1/agents/oncall/resume":                 `{"ok": true, "agent": "oncall", "verb": "resume", "state": "running", "dropped": 2, "code": 200, "owner": "w-1"}`,
		"/v1/agents/oncall/interrupt":              `{"ok": true, "agent": "oncall", "verb": "interrupt", "state": "paused", "turn_running": true, "code": 200, "owner": "w-1"}`,
		"/v1/agents/quiet/interrupt":               `{"ok": true, "agent": "quiet", "verb": "interrupt", "state": "sleeping", "turn_running": false, "code": 200, "owner": "w-2"}`,
		"/v1/agents/oncall/wake":                   `{"ok": true, "agent": "oncall", "verb": "wake", "state": "running", "code": 200, "owner": "w-1"}`,
		"/v1/agents/oncall/dlq/42/replay":          `{"replayed": true, "dead_letter": {"seq": 42, "agent": "oncall", "id": "disk-1", "reason": "operator_dropped", "at": "2026-05-04T10:00:00Z", "body": "x", "bytes": 1}}`,
		"/v1/agents/oncall/schedules/morning/run":  `{"queued": true, "agent": "oncall", "schedule": "morning"}`,
		"/v1/agents/oncall/schedules/soon/run":     `{"queued": true, "agent": "oncall", "schedule": "soon", "next_fire": "` + time.Now().Add(90*time.Minute+30*time.Second).UTC().Format(time.RFC3339) + `"}`,
		"/v1/agents/oncall/guardrails/reset":       `{"guardrail": "daily_usd", "added_budget_usd": 2, "ceiling_usd": 22, "ceiling_before_usd": 20, "spent_usd": 20.00012, "cleared": true}`,
		"/v1/agents/quiet/guardrails/reset":        `{"guardrail": "watchdog", "added_budget_usd": 0, "spent_usd": 0, "cleared": false}`,
		"/v1/agents/oncall/approvals/01HZ/approve": `{"decision": "approved", "request": {"id": "01HZ", "tool": "restart_service", "args": {"name": "db-2"}}}`,
		"/v1/agents/oncall/approvals/01HY/deny":    `{"decision": "denied", "request": {"id": "01HY", "tool": "restart_service", "args": {"name": "db-1"}}}`,
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
		{[]string{"schedule", "run", "oncall", "morning"}, "oncall: schedule morning fired; its prompt runs in a turn now\n"},
		{[]string{"schedule", "run", "oncall", "soon"}, "oncall: schedule soon fired; its prompt runs in a turn now; next tick in 1h30m\n"},
		{[]string{"reset", "oncall", "daily_usd", "--add-budget", "2"}, "oncall: daily_usd reset; ceiling $20 → $22 (added $2); spent $20 of $22; trip cleared: the agent runs again\n"},
		{[]string{"reset", "quiet", "watchdog"}, "quiet: watchdog reset; no trip to clear\n"},
		{[]string{"approve", "oncall", "01HZ"}, `oncall: approved 01HZ, restart_service {"name":"db-2"}; it runs now and the agent is woken with its result` + "\n"},
		{[]string{"deny", "oncall", "01HY", "--reason", "not now"}, `oncall: denied 01HY, restart_service {"name":"db-1"} (reason: not now); it never runs and the agent is told` + "\n"},
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
	for _, args := range [][]string{{"schedule", "run", "oncall", "morning"}, {"reset", "quiet", "watchdog"}, {"approve", "oncall", "01HZ"}} {
		out, errs, code := run(env, append(args, "-o", "json", "--api", srv.URL)...)
		if code != exitOK || !strings.HasPrefix(out, "{\n  \"") {
			t.Errorf("%v -o json: exit %d, printed\n%s\nstderr: %s", args, code, out, errs)
		}
	}
	if _, errs, code := run(env, "wake", "oncall", "-o", "yaml", "--api", srv.URL); code != exitConfig {
		t.Errorf("wake -o yaml: exit %d (want %d): %s", code, exitConfig, errs)
	}
}
