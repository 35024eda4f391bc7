package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/config"
)

// jsonLines parses every line of s as one JSON object; it fails the test
// on any line that is not.
func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	if s == "" {
		t.Fatal("no log lines")
	}
	if !strings.HasSuffix(s, "\n") {
		t.Fatalf("the log does not end with a newline: %q", s)
	}
	var recs []map[string]any
	for i, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("stderr line %d is not JSON (%v): %q", i+1, err, line)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := rec[k]; !ok {
				t.Fatalf("stderr line %d has no %q: %q", i+1, k, line)
			}
		}
		recs = append(recs, rec)
	}
	return recs
}

// record returns the first record with msg, failing the test without one.
func record(t *testing.T, recs []map[string]any, msg string) map[string]any {
	t.Helper()
	for _, r := range recs {
		if r["msg"] == msg {
			return r
		}
	}
	t.Fatalf("no %q record among %d", msg, len(recs))
	return nil
}

// wantDurationString checks that rec[key] is a duration written as a
// string ("15s"), not JSON's nanosecond count.
func wantDurationString(t *testing.T, rec map[string]any, key string) time.Duration {
	t.Helper()
	s, ok := rec[key].(string)
	if !ok {
		t.Fatalf("%q: %s is %T %v, want a duration string", rec["msg"], key, rec[key], rec[key])
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %s %q: %v", rec["msg"], key, s, err)
	}
	return d
}

// TestRunJSONLogsOnlyJSON runs the embedded demo with --log-format json
// through a turn and a shutdown: every line on stderr is a JSON record,
// the banner is one of them ("worker started", with the banner's facts as
// attributes) instead of text on stdout, and durations are strings.
func TestRunJSONLogsOnlyJSON(t *testing.T) {
	t.Parallel()
	r := startCmd(t, testEnv(nil), "--log-format", "json", "run", "--data-dir", t.TempDir(), "--nats-listen", "-1", "--api-listen", "127.0.0.1:0")
	eventually(t, func() bool {
		return strings.Contains(r.errb.String(), `"msg":"turn completed","agent":"demo","turn":1,`)
	},
		r.logs, "no demo turn in the log")
	if code := r.stop(t); code != exitOK {
		t.Fatalf("exit %d\n%s", code, r.logs())
	}
	if r.out.String() != "" {
		t.Fatalf("stdout in JSON mode: %q", r.out.String())
	}
	recs := jsonLines(t, r.errb.String())

	banner := record(t, recs, "worker started")
	for key, want := range map[string]any{
		"version": "dev", "agents": 1.0, "config": "the embedded default (no --config)", "nats_server": "embedded", "store": "nats://",
	} {
		if banner[key] != want {
			t.Errorf("banner %s = %v, want %v", key, banner[key], want)
		}
	}
	if names, _ := banner["agent_names"].([]any); len(names) != 1 || names[0] != "demo" {
		t.Errorf("banner agent_names = %v", banner["agent_names"])
	}
	for key, prefix := range map[string]string{
		"nats": "nats://127.0.0.1:", "api": "http://127.0.0.1:", "metrics": "http://127.0.0.1:",
		"send": `agent-worker send demo "disk full on db-1" --nats nats://127.0.0.1:`, "events": "nats sub 'agents.*.events.>' -s nats://",
	} {
		if s, _ := banner[key].(string); !strings.HasPrefix(s, prefix) {
			t.Errorf("banner %s = %v, want it to start with %q", key, banner[key], prefix)
		}
	}

	if d := wantDurationString(t, record(t, recs, "turn completed"), "duration"); d <= 0 {
		t.Errorf("turn duration %v", d)
	}
	if d := wantDurationString(t, record(t, recs, "shutting down: no new turns; running turns may finish"), "grace"); d != 30*time.Second {
		t.Errorf("grace %v, want 30s", d)
	}
	if d := wantDurationString(t, record(t, recs, "leases"), "ttl"); d != 15*time.Second {
		t.Errorf("lease ttl %v, want 15s", d)
	}
	record(t, recs, "worker stopped")
}

// TestLogLevelWarnSuppressesInfo runs the demo with --log-level warn: it
// turns (the API says so) but the log holds no INFO line, only warnings
// (the demo's unpriced model); the text banner still goes to stdout.
func TestLogLevelWarnSuppressesInfo(t *testing.T) {
	t.Parallel()
	r := startCmd(t, testEnv(nil), "run", "--log-level", "warn", "--data-dir", t.TempDir(), "--nats-listen", "-1", "--api-listen", "127.0.0.1:0")
	url := r.bannerAPI(t)
	eventually(t, func() bool {
		resp, err := http.Get(url + "/v1/agents/demo")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var a struct{ Turns int }
		return json.NewDecoder(resp.Body).Decode(&a) == nil && a.Turns >= 1
	}, r.logs, "the demo agent never turned")
	if code := r.stop(t); code != exitOK {
		t.Fatalf("exit %d\n%s", code, r.logs())
	}
	errs := r.errb.String()
	if strings.Contains(errs, "level=INFO") || !strings.Contains(errs, "level=WARN") {
		t.Fatalf("with --log-level warn the log should hold warnings and no INFO:\n%s", errs)
	}
	if !strings.Contains(r.out.String(), "running 1 agent(s) [demo]") {
		t.Fatalf("no banner on stdout: %q", r.out.String())
	}
}

// TestLogFormatFromEnv sets AGENT_WORKER_LOG_FORMAT=json in the process
// environment: the embedded demo logs JSON only, a failing command's
// error is one JSON record, and --log-format text still wins over the
// variable.
func TestLogFormatFromEnv(t *testing.T) { // not parallel: sets the environment
	t.Setenv(envLogFormat, "json")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- execute(ctx, []string{"run", "--data-dir", t.TempDir(), "--nats-listen", "-1", "--api-listen", "127.0.0.1:0"}, &out, &errb)
	}()
	eventually(t, func() bool { return strings.Contains(errb.String(), `"msg":"worker started"`) }, errb.String, "no banner record")
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("exit %d:\n%s", code, errb.String())
		}
	case <-time.After(waitDeadline):
		t.Fatal("run did not stop after cancellation")
	}
	jsonLines(t, errb.String())
	if out.String() != "" {
		t.Fatalf("stdout in JSON mode: %q", out.String())
	}

	p := writeFile(t, broken)
	var vout, verr syncBuffer
	if code := execute(context.Background(), []string{"validate", "--config", p}, &vout, &verr); code != exitConfig {
		t.Fatalf("validate: exit %d: %s", code, verr.String())
	}
	recs := jsonLines(t, verr.String())
	if len(recs) != 1 {
		t.Fatalf("want one record for the failure, got %d:\n%s", len(recs), verr.String())
	}
	rec := recs[0]
	if rec["level"] != "ERROR" || rec["msg"] != "command failed" || rec["command"] != "agent-worker validate" || rec["exit_code"] != 2.0 ||
		!strings.Contains(rec["error"].(string), p+`:7: agents[1].name: duplicate agent name "oncall"`) {
		t.Fatalf("failure record: %v", rec)
	}

	var tout, terr syncBuffer
	execute(context.Background(), []string{"--log-format", "text", "validate", "--config", p}, &tout, &terr)
	if strings.HasPrefix(terr.String(), "{") || !strings.Contains(terr.String(), p+":6: ") {
		t.Fatalf("--log-format text did not win over %s=json:\n%s", envLogFormat, terr.String())
	}
}

// TestFailureInTheConfigsJSONIsJSON: a worker that cannot start, with
// log.format json in its config file and no flag or variable, says so in
// JSON only — the Redis client's own complaints included: store/redisstore
// routes go-redis's logger through the worker's — and never prints the
// store's password.
func TestFailureInTheConfigsJSONIsJSON(t *testing.T) { // not parallel: go-redis's logger is process-wide, another worker's would take its lines
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	p := writeFile(t, "log: {format: json}\nstore: {url: \"redis://:hunter2@"+addr+"/0\"}\nmodels:\n  f: {provider: scripted, behaviour: demo}\nagents: [{name: a, model: f}]\n")
	out, errs, code := run(testEnv(nil), "run", "--config", p, "--data-dir", t.TempDir(), "--nats-listen", "-1", "--api-listen", "127.0.0.1:0")
	if code != exitUnreachable {
		t.Fatalf("exit %d: %s", code, errs)
	}
	recs := jsonLines(t, errs)
	redisLines := 0
	for _, r := range recs {
		if r["component"] == "go-redis" {
			redisLines++
		}
	}
	if redisLines == 0 {
		t.Errorf("no go-redis record: is its logger still routed through slog?\n%s", errs)
	}
	last := recs[len(recs)-1]
	if last["msg"] != "command failed" || last["exit_code"] != float64(exitUnreachable) || !strings.Contains(last["error"].(string), "redis at "+addr) {
		t.Fatalf("last record: %v", last)
	}
	if strings.Contains(out+errs, "hunter2") {
		t.Fatalf("the password was printed:\n%s", errs)
	}
}

// TestLogSettingsPrecedence: flag over environment over config file over
// the default (text, info).
func TestLogSettingsPrecedence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		flags, file config.Log
		env         map[string]string
		want        config.Log
	}{
		{"default", config.Log{}, config.Log{}, nil, config.Log{Format: "text", Level: "info"}},
		{"file", config.Log{}, config.Log{Format: "json", Level: "debug"}, nil, config.Log{Format: "json", Level: "debug"}},
		{"env over file", config.Log{}, config.Log{Format: "json", Level: "debug"},
			map[string]string{envLogFormat: "text", envLogLevel: "error"}, config.Log{Format: "text", Level: "error"}},
		{"flag over env", config.Log{Format: "json", Level: "warn"}, config.Log{Format: "text", Level: "debug"},
			map[string]string{envLogFormat: "text", envLogLevel: "error"}, config.Log{Format: "json", Level: "warn"}},
		{"env any case", config.Log{}, config.Log{}, map[string]string{envLogFormat: "JSON", envLogLevel: " Warn "}, config.Log{Format: "json", Level: "warn"}},
		{"one of each", config.Log{Level: "debug"}, config.Log{Level: "error"}, map[string]string{envLogFormat: "json"}, config.Log{Format: "json", Level: "debug"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &cli{env: testEnv(tc.env), logFlags: tc.flags, logFile: tc.file}
			got, err := c.logSettings()
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestRunConfigLogPrecedence: run's config gets the decided log settings:
// AGENT_WORKER_LOG_LEVEL over the file's log.level, the file's
// log.format where nothing else says.
func TestRunConfigLogPrecedence(t *testing.T) {
	t.Parallel()
	p := writeFile(t, "log: {format: json, level: debug}\nmodels:\n  f: {provider: scripted, behaviour: demo}\nagents: [{name: a, model: f}]\n")
	c := &cli{env: testEnv(map[string]string{envLogLevel: "warn"})}
	cfg, err := c.runConfig(p, overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (config.Log{Format: "json", Level: "warn"}); cfg.Log != want {
		t.Fatalf("log %+v, want %+v", cfg.Log, want)
	}
}

// TestLogValues: durations are strings ("15s") in both formats, a
// config.Duration too, and floats whose key ends in usd are rounded to
// micro-dollars (in groups too); other floats are left alone.
func TestLogValues(t *testing.T) {
	t.Parallel()
	logTo := func(format string, w io.Writer) {
		newLogger(config.Log{Format: format, Level: "info"}, w).Info("spend",
			"grace", 15*time.Second, "ttl", config.Duration(90*time.Second),
			"cost_usd", 0.1+0.2, "spent_usd", 1.23456789, "usd", 2.0000004, "ratio", 0.123456789,
			slog.Group("turn", "ceiling_usd", 0.1234564))
	}
	var j bytes.Buffer
	logTo("json", &j)
	var rec map[string]any
	if err := json.Unmarshal(j.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"grace": "15s", "ttl": "1m30s", "cost_usd": 0.3, "spent_usd": 1.234568, "usd": 2.0, "ratio": 0.123456789,
	} {
		if rec[key] != want {
			t.Errorf("json %s = %v (%T), want %v", key, rec[key], rec[key], want)
		}
	}
	if g, _ := rec["turn"].(map[string]any); g["ceiling_usd"] != 0.123456 {
		t.Errorf("json turn.ceiling_usd = %v", rec["turn"])
	}
	var txt bytes.Buffer
	logTo("text", &txt)
	for _, want := range []string{"grace=15s", "ttl=1m30s", "cost_usd=0.3 ", "spent_usd=1.234568", "turn.ceiling_usd=0.123456"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text lacks %q: %s", want, txt.String())
		}
	}
}
