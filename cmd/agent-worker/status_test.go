package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/guard"
)

// fakeAgents is what the fake API serves: times relative to the request,
// so the relative times printed are known ("in 20s", "3m ago").
func fakeAgents(now time.Time) []api.AgentView {
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	return []api.AgentView{{
		Name: "oncall", State: "sleeping", Owner: "worker-b", ServedBy: "worker-a", Model: "gpt-4.1-mini", Turns: 7, InboxPending: 2, DeferredPending: 1, InboxCap: 256,
		NextWake: at(20*time.Second + 400*time.Millisecond), NextWakeCause: "timer", NextWakeReason: "the wake the model asked for",
		Guardrails: &guard.Status{Model: "gpt-4.1-mini", Priced: true,
			Turn:    guard.Ceiling{SpentUSD: 0.0123456789, CeilingUSD: 1},
			Session: guard.Ceiling{SpentUSD: 0.3, CeilingUSD: 5, RemainingUSD: usdPtr(4.7)},
			Daily:   guard.Ceiling{SpentUSD: 1.25, ResetsAt: at(9 * time.Hour)}},
		Schedules: []api.ScheduleView{{Name: "hourly", NextFire: at(42*time.Minute + 30*time.Second), Timezone: "Europe/Berlin", NextFireLocal: "2026-11-30 09:42:30 CET"}},
		LastTurn: &api.TurnView{N: 7, Started: now.Add(-3*time.Minute - 10*time.Second), Outcome: "ok", DurationSeconds: 1.5,
			TokensIn: 150, TokensOut: 20, ModelCalls: 2, ToolCalls: 1, Messages: 1, CostUSD: 0.0123456789, Text: "Disk on db-1\nis fine now."},
	}, {
		Name: "payments", State: "waiting", Model: "gemini-2.5-flash", WaitingFor: "store: redis unreachable", FailedTurns: 2,
		ThrottledUntil: at(5*time.Minute + 30*time.Second), ThrottledBy: "turns_per_hour", Schedules: []api.ScheduleView{},
	}}
}

// fakeAPI serves GET /v1/agents and /v1/agents/{name} from fakeAgents to
// the bearer token want, and records nothing else.
func fakeAPI(t *testing.T, want string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+want {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error": "missing or unknown token"}`))
			return
		}
		agents := fakeAgents(time.Now())
		var body any = map[string]any{"agents": agents}
		if name, ok := strings.CutPrefix(r.URL.Path, "/v1/agents/"); ok {
			body = nil
			for _, a := range agents {
				if a.Name == name {
					body = a
				}
			}
			if body == nil {
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"error": "unknown agent"}`))
				return
			}
		} else if r.URL.Path != "/v1/agents" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// wantLines checks that out holds each of want, each within one line.
func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		found := false
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// fields splits a table's lines into their cells (two spaces or more
// apart).
func fields(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		var cells []string
		for _, c := range strings.Split(line, "  ") {
			if c = strings.TrimSpace(c); c != "" {
				cells = append(cells, c)
			}
		}
		rows = append(rows, cells)
	}
	return rows
}

// TestStatusTable: the default list is a table with relative times.
func TestStatusTable(t *testing.T) {
	t.Parallel()
	srv := fakeAPI(t, "tok")
	out, errs, code := run(testEnv(map[string]string{envToken: "tok"}), "status", "--api", srv.URL)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	rows := fields(out)
	want := [][]string{
		{"AGENT", "STATE", "OWNER", "NEXT WAKE", "INBOX", "DEFERRED", "SPEND TODAY", "CEILING", "LEFT", "LAST TURN"},
		{"oncall", "sleeping", "worker-b", "in 20s", "2", "1", "$1.25", "$5 session", "$4.70", "ok 3m ago"},
		{"payments", "waiting", "-", "-", "0", "0", "-", "-", "-", "-"},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows:\n%s", out)
	}
	for i := range want {
		if strings.Join(rows[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("row %d = %q, want %q", i, rows[i], want[i])
		}
	}
}

// TestStatusWide: -o wide adds the wake's cause and reason, what the
// agent waits for, the throttle, turns, failures, spend and the model.
func TestStatusWide(t *testing.T) {
	t.Parallel()
	srv := fakeAPI(t, "tok")
	out, errs, code := run(testEnv(map[string]string{envToken: "tok"}), "status", "-o", "wide", "--api", srv.URL)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	rows := fields(out)
	want := [][]string{
		{"AGENT", "STATE", "OWNER", "NEXT WAKE", "CAUSE", "REASON", "WAITING FOR", "THROTTLED", "TURNS", "FAILED", "INBOX", "DEFERRED", "SESSION USD", "DAILY USD", "MODEL", "LAST TURN"},
		{"oncall", "sleeping", "worker-b", "in 20s", "timer", "the wake the model asked for", "-", "-", "7", "0", "2", "1", "0.30/5", "1.25/-", "gpt-4.1-mini", "ok 3m ago"},
		{"payments", "waiting", "-", "-", "-", "-", "store: redis unreachable", "turns_per_hour in 5m", "0", "2", "0", "0", "-", "-", "gemini-2.5-flash", "-"},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows:\n%s", out)
	}
	for i := range want {
		if strings.Join(rows[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("row %d = %q\n want %q", i, rows[i], want[i])
		}
	}
}

// TestStatusJSON: -o json prints the API's JSON, for the list and for one
// agent.
func TestStatusJSON(t *testing.T) {
	t.Parallel()
	srv := fakeAPI(t, "tok")
	env := testEnv(map[string]string{envToken: "tok"})
	out, errs, code := run(env, "status", "-o", "json", "--api", srv.URL)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var list struct {
		Agents []api.AgentView `json:"agents"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Agents) != 2 || list.Agents[1].WaitingFor != "store: redis unreachable" {
		t.Fatalf("%v: %s", err, out)
	}
	out, errs, code = run(env, "status", "oncall", "-o", "json", "--api", srv.URL)
	var one api.AgentView
	if code != exitOK || json.Unmarshal([]byte(out), &one) != nil || one.Name != "oncall" || one.LastTurn.N != 7 {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	if !strings.Contains(out, `"remaining_usd": 4.7`) || !strings.Contains(out, `"resets_at":`) {
		t.Fatalf("the JSON lacks remaining_usd or resets_at:\n%s", out)
	}
}

// TestStatusBlock: `status AGENT` is a block of key: value lines: state,
// why, next wake (relative and absolute), inbox, last turn, guardrails
// (spend against ceilings, in micro-dollars at most).
func TestStatusBlock(t *testing.T) {
	t.Parallel()
	srv := fakeAPI(t, "tok")
	env := testEnv(map[string]string{envToken: "tok"})
	out, errs, code := run(env, "status", "oncall", "--api", srv.URL)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	wantLines(t, out,
		"agent:       oncall",
		"state:       sleeping",
		"owner:       worker-b (served by worker-a)",
		"why:         sleeping until the next wake or a message",
		"next wake:   in 20s (", "), timer: the wake the model asked for",
		"schedules:   hourly in 42m (",
		"; 2026-11-30 09:42:30 CET in Europe/Berlin",
		"inbox:       2 pending of 256, 1 deferred, 0 wake(s) pending",
		"last turn:   #7 ok 3m ago (", "took 1.5s",
		"2 model call(s), 1 tool call(s), 1 message(s), tokens 150 in / 20 out, $0.012",
		"said: Disk on db-1 is fine now.",
		"guardrails:  turn $0.012 of $1, session $0.30 of $5, daily $1.25 (no ceiling), worker daily $0 (no ceiling)",
		"turns:       7 (model gpt-4.1-mini)",
	)
	// The absolute time is the next wake's, to the second.
	if !strings.Contains(out, time.Now().Add(20*time.Second).Local().Format("2006-01-02 ")) {
		t.Errorf("no absolute date in:\n%s", out)
	}

	out, _, _ = run(env, "status", "payments", "--api", srv.URL)
	wantLines(t, out,
		"state:       waiting",
		"owner:       -",
		"why:         waiting for store: redis unreachable; it runs by itself once that is back; held back by turns_per_hour (next turn in 5m); 2 failed turn(s) in a row; retries back off",
		"next wake:   none armed",
		"last turn:   none yet",
		"guardrails:  none",
	)

	out, _, code = run(env, "status", "oncall", "-o", "table", "--api", srv.URL)
	if rows := fields(out); code != exitOK || len(rows) != 2 || rows[1][0] != "oncall" {
		t.Fatalf("status oncall -o table: exit %d\n%s", code, out)
	}
	if _, errs, code := run(env, "status", "nobody", "--api", srv.URL); code != exitFailed || !strings.Contains(errs, "unknown agent (HTTP 404)") {
		t.Fatalf("unknown agent: exit %d: %s", code, errs)
	}
}

// TestTokenSources: --token, then --token-file, then AGENT_WORKER_TOKEN;
// an unreadable or empty token file is exit 2; a wrong token is the API's
// 401, exit 1.
func TestTokenSources(t *testing.T) {
	t.Parallel()
	srv := fakeAPI(t, "file-token")
	dir := t.TempDir()
	good, empty := filepath.Join(dir, "token"), filepath.Join(dir, "empty")
	if err := os.WriteFile(good, []byte("file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	envWrong := testEnv(map[string]string{envToken: "env-token"})
	for _, tc := range []struct {
		name string
		env  environ
		args []string
		code int
		want string
	}{
		{"token file over env", envWrong, []string{"--token-file", good}, exitOK, "oncall"},
		{"token flag over env", envWrong, []string{"--token", "file-token"}, exitOK, "oncall"},
		{"env", testEnv(map[string]string{envToken: "file-token"}), nil, exitOK, "oncall"},
		{"wrong env token", envWrong, nil, exitFailed, "missing or unknown token (HTTP 401)"},
		{"missing token file", envWrong, []string{"--token-file", filepath.Join(dir, "nope")}, exitConfig, "--token-file: open "},
		{"empty token file", envWrong, []string{"--token-file", empty}, exitConfig, "the file is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, verb := range [][]string{{"status"}, {"pause", "oncall"}, {"health"}} {
				args := append(append(verb, "--api", srv.URL), tc.args...)
				out, errs, code := run(tc.env, args...)
				if verb[0] != "status" {
					// The fake serves only GET /v1/agents: the verb got past
					// the token when the answer is not the 401.
					if tc.code == exitOK && strings.Contains(errs, "HTTP 401") || tc.code != exitOK && code != tc.code {
						t.Errorf("%v: exit %d: %s", args, code, errs)
					}
					continue
				}
				if code != tc.code || !strings.Contains(out+errs, tc.want) {
					t.Errorf("%v: exit %d, want %d with %q:\n%s%s", args, code, tc.code, tc.want, out, errs)
				}
			}
		})
	}
}

// TestRelTime: relative times for people.
func TestRelTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		0: "now", 400 * time.Millisecond: "now", 20 * time.Second: "in 20s", -59 * time.Second: "59s ago",
		3*time.Minute + 59*time.Second: "in 3m", -3 * time.Minute: "3m ago", 2*time.Hour + 5*time.Minute: "in 2h5m",
		-2 * time.Hour: "2h ago", 27 * time.Hour: "in 1d3h", -48 * time.Hour: "2d ago",
	} {
		if got := relTime(now.Add(d), now); got != want {
			t.Errorf("relTime(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestStatusShowsAnAgentWithoutOwner: an agent no replica owns right now
// (the API lists it with state unknown and the reason) shows that reason
// in the block and no owner in the table.
func TestStatusShowsAnAgentWithoutOwner(t *testing.T) {
	t.Parallel()
	a := api.AgentView{Name: "oncall", State: api.StateUnknown, ServedBy: "worker-a", Model: "gpt-4.1-mini",
		Error: `no replica owns agent "oncall" right now (no owner answered on agents.oncall.control within 2s)`}
	var b strings.Builder
	writeBlock(&b, a, time.Now())
	wantLines(t, b.String(),
		"state:       unknown",
		"owner:       - (served by worker-a)",
		`why:         no replica owns agent "oncall" right now (no owner answered`,
	)
	b.Reset()
	if err := writeTable(&b, []api.AgentView{a}, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	if rows := fields(b.String()); len(rows) != 2 || strings.Join(rows[1][:3], "|") != "oncall|unknown|-" {
		t.Fatalf("table:\n%s", b.String())
	}
}

func usdPtr(v float64) *float64 { return &v }
