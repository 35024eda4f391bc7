package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// `schedule run` posts to the schedule's run route of the API that
// --config names (its api.listen), and says the API's refusal.
func TestScheduleRunFromTheCLI(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.URL.Path, "/nope/") {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error": "agent \"oncall\" has no schedule \"nope\" (schedules: morning)"}`))
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"queued": true, "schedule": "morning"}`))
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	cfg := writeFile(t, `api: {listen: "`+l.Addr().String()+`"}
models: {canned: {provider: scripted, script: [{text: ok}]}}
agents: [{name: oncall, model: canned, schedules: [{name: morning, cron: "0 8 * * *", prompt: "report"}]}]
`)
	var out, errb syncBuffer
	if code := execute(context.Background(), []string{"schedule", "run", "oncall", "morning", "--config", cfg}, &out, &errb); code != exitOK {
		t.Fatalf("schedule run: exit %d: %s", code, errb.String())
	}
	if out.String() != "oncall: schedule morning fired; its prompt runs in a turn now\n" {
		t.Fatalf("output %q", out.String())
	}
	var refused syncBuffer
	if code := execute(context.Background(), []string{"schedule", "run", "oncall", "nope", "--config", cfg}, &out, &refused); code == exitOK || !strings.Contains(refused.String(), `has no schedule \"nope\"`) && !strings.Contains(refused.String(), `has no schedule "nope"`) {
		t.Fatalf("an unknown schedule: exit %d: %s", code, refused.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, ",") != "POST /v1/agents/oncall/schedules/morning/run,POST /v1/agents/oncall/schedules/nope/run" {
		t.Fatalf("requests %q", got)
	}
}

// resume of a halted agent exits non-zero and prints the worker's reason,
// with the reset to run.
func TestResumeOfAHaltedAgentFails(t *testing.T) {
	t.Parallel()
	hint := "agent \"oncall\" is halted by daily_usd (spend today $20 reached the daily ceiling of $20): resume runs no turn until the guardrail is reset; run `agent-worker reset oncall daily_usd --add-budget USD` (POST /v1/agents/oncall/guardrails/reset), then resume"
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		b, _ := json.Marshal(map[string]string{"error": hint})
		_, _ = w.Write(b)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	var out, errb syncBuffer
	code := execute(context.Background(), []string{"resume", "oncall", "--api", "http://" + l.Addr().String()}, &out, &errb)
	if code == exitOK || !strings.Contains(errb.String(), "agent-worker reset oncall daily_usd --add-budget USD") || !strings.Contains(errb.String(), "HTTP 409") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
