package tracing

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/tracing"
	"github.com/agent-worker/agent-worker/worker"
)

// workerConfig: embedded NATS on a random port, the API on a free
// loopback port, traces to Jaeger's OTLP gRPC receiver, and one agent on
// a scripted model that calls http_get, then publish, then says it is
// done.
const workerConfig = `data_dir: %[1]s/data
shutdown_grace: 5s
api:
  listen: "127.0.0.1:0"
nats:
  listen: "-1"
telemetry:
  endpoint: %[2]s
  protocol: grpc
  service_name: agent-worker-e2e
models:
  fake:
    provider: scripted
    model: fake-1
    script:
      - call: {name: http_get, args: {url: "%[3]s/runbook"}}
        usage: {input: 1000, output: 20}
      - call: {name: publish, args: {subject: ops.reports.db, text: "disk full on db-1: paged"}}
        usage: {input: 1100, output: 20}
      - text: "paged the on-call for db-1"
        usage: {input: 1200, output: 12}
    loop: true
agents:
  - name: oncall
    model: fake
    instruction: "You are on call."
    tools: [publish, http_get]
    publish: ["ops.reports.>"]
    http_get: ["%[3]s/"]
    http_get_allow_private: true
`

// senderTrace is the trace context the alert is published with: a trace
// of the monitoring pipeline that sent it.
const (
	senderTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	senderSpanID  = "00f067aa0ba902b7"
	senderParent  = "00-" + senderTraceID + "-" + senderSpanID + "-01"
)

// TestMessageToJaeger: a message published with a traceparent produces
// one trace in Jaeger holding the turn, ADK's agent and model spans and
// both tool calls, the turn linked to the message's trace; the publish
// and the HTTP request the tools make carry the turn's trace; the turn's
// log lines and its turn_duration_seconds exemplar name it.
func TestMessageToJaeger(t *testing.T) {
	j := startJaeger(t, jaegerBinary(t))
	dir := t.TempDir()

	var hmu sync.Mutex
	var runbookParent string
	runbook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hmu.Lock()
		runbookParent = r.Header.Get("traceparent")
		hmu.Unlock()
		io.WriteString(w, "restart the disk")
	}))
	defer runbook.Close()

	path := filepath.Join(dir, "agent-worker.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, workerConfig, dir, j.otlpGRPC, runbook.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	settings, err := tracing.Resolve(cfg.Telemetry, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	traces, err := tracing.Start(ctx, settings, "e2e-replica", "test")
	if err != nil {
		t.Fatal(err)
	}
	defer traces.Shutdown(ctx)
	logPath := filepath.Join(dir, "worker.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	w, err := worker.Start(ctx, cfg, worker.Options{Log: slog.New(slog.NewJSONHandler(logFile, nil)), Tracing: traces})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			w.Stop(sctx)
		}
	}
	defer stop()
	done := w.Events().Subscribe(100, func(e events.Event) bool { return e.Type == events.TurnCompleted || e.Type == events.TurnFailed })
	defer done.Close()

	nc, err := nats.Connect(w.NATS().NC.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	reports, err := nc.SubscribeSync("ops.reports.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	alert := nats.NewMsg("agents.oncall.inbox")
	alert.Data = []byte(`{"text": "disk full on db-1", "id": "alert-1"}`)
	alert.Header["traceparent"] = []string{senderParent}
	if err := nc.PublishMsg(alert); err != nil {
		t.Fatal(err)
	}

	var turn events.Event
	select {
	case turn = <-done.C:
	case <-time.After(30 * time.Second):
		t.Fatal("no turn ended within 30s")
	}
	if turn.Type != events.TurnCompleted {
		t.Fatalf("turn did not complete: %v", turn.Data)
	}
	traceID, _ := turn.Data["trace_id"].(string)
	if len(traceID) != 32 {
		t.Fatalf("turn-completed carries no trace id: %v", turn.Data)
	}

	// The publish and the HTTP request carried the turn's trace.
	pub, err := reports.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("the publish tool's message: %v", err)
	}
	if got := pub.Header.Get("traceparent"); !strings.Contains(got, traceID) {
		t.Errorf("published report's traceparent = %q, want the turn's trace %s", got, traceID)
	}
	hmu.Lock()
	if !strings.Contains(runbookParent, traceID) {
		t.Errorf("http_get's traceparent = %q, want the turn's trace %s", runbookParent, traceID)
	}
	hmu.Unlock()

	// The exemplar of the turn's duration names the trace.
	req, _ := http.NewRequest(http.MethodGet, "http://"+w.APIAddr()+"/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	exposition, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(exposition), `trace_id="`+traceID+`"`) {
		t.Errorf("/metrics as OpenMetrics has no exemplar with trace_id %s", traceID)
	}

	stop() // the last spans go out with the provider's flush
	if err := traces.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}

	// The turn's log lines name the trace.
	logs, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"turn started", "turn completed"} {
		if !logLineHas(logs, msg, traceID) {
			t.Errorf("log line %q does not carry trace_id %s", msg, traceID)
		}
	}

	var got jaegerTrace
	var raw []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		ts, body := j.traces(t, "agent-worker-e2e")
		raw = body
		found := false
		for _, tr := range ts {
			if tr.TraceID == traceID {
				got, found = tr, true
			}
		}
		if found && hasSpan(got, "execute_tool http_get") && hasSpan(got, "turn oncall") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s not complete in Jaeger after 30s; Jaeger has:\n%s", traceID, raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the trace as Jaeger returns it (GET /api/traces?service=agent-worker-e2e):\n%s", summarize(got))

	byName := map[string][]jaegerSpan{}
	ids := map[string]jaegerSpan{}
	for _, s := range got.Spans {
		byName[s.OperationName] = append(byName[s.OperationName], s)
		ids[s.SpanID] = s
	}
	turnSpans := byName["turn oncall"]
	if len(turnSpans) != 1 {
		t.Fatalf("want one turn span in the trace, got %d", len(turnSpans))
	}
	ts := turnSpans[0]
	for _, want := range []struct {
		key  string
		want any
	}{
		{"gen_ai.agent.name", "oncall"},
		{"gen_ai.request.model", "fake-1"},
		{"agent_worker.outcome", "completed"},
		{"agent_worker.messages", float64(1)},
		{"agent_worker.model_calls", float64(3)},
		{"agent_worker.tool_calls", float64(2)},
		{"gen_ai.usage.input_tokens", float64(3300)},
	} {
		if got := ts.tag(want.key); fmt.Sprint(got) != fmt.Sprint(want.want) {
			t.Errorf("turn span tag %s = %v, want %v", want.key, got, want.want)
		}
	}
	linked := false
	for _, r := range ts.References {
		if r.TraceID == senderTraceID && r.SpanID == senderSpanID {
			linked = true
		}
		if r.RefType == "CHILD_OF" && r.TraceID != traceID {
			t.Errorf("the turn is a child of a foreign trace %s: a message's trace context must only be a link", r.TraceID)
		}
	}
	if !linked {
		t.Errorf("turn span has no link to the message's trace %s/%s: %+v", senderTraceID, senderSpanID, ts.References)
	}
	// Every other span descends from the turn, and no span holds what a
	// tool read (content is captured only on request).
	for _, s := range got.Spans {
		if s.tag("gcp.vertex.agent.tool_response") != nil || s.tag("gcp.vertex.agent.tool_call_args") != nil {
			t.Errorf("span %q exports tool content", s.OperationName)
		}
		if s.SpanID == ts.SpanID {
			continue
		}
		if !descends(s, ts.SpanID, ids) {
			t.Errorf("span %q does not descend from the turn", s.OperationName)
		}
	}
	for _, name := range []string{"invoke_agent oncall", "execute_tool publish", "execute_tool http_get"} {
		if len(byName[name]) != 1 {
			t.Errorf("want one %q span, got %d", name, len(byName[name]))
		}
	}
	models := byName["generate_content fake-1"]
	if len(models) != 3 {
		t.Fatalf("want three generate_content spans (two tool calls, then the answer), got %d", len(models))
	}
	var in float64
	for _, m := range models {
		if m.tag("gen_ai.request.model") != "fake-1" {
			t.Errorf("model span gen_ai.request.model = %v", m.tag("gen_ai.request.model"))
		}
		v, _ := m.tag("gen_ai.usage.input_tokens").(float64)
		in += v
	}
	if in != 3300 {
		t.Errorf("model spans' gen_ai.usage.input_tokens sum to %v, want 3300", in)
	}
}

// hasSpan reports whether tr has a span named name.
func hasSpan(tr jaegerTrace, name string) bool {
	for _, s := range tr.Spans {
		if s.OperationName == name {
			return true
		}
	}
	return false
}

// descends reports whether s is below the span root through CHILD_OF
// references.
func descends(s jaegerSpan, root string, ids map[string]jaegerSpan) bool {
	for range len(ids) {
		parent := ""
		for _, r := range s.References {
			if r.RefType == "CHILD_OF" {
				parent = r.SpanID
			}
		}
		switch {
		case parent == root:
			return true
		case parent == "":
			return false
		}
		s = ids[parent]
	}
	return false
}

// logLineHas reports whether a JSON log line with msg carries traceID.
func logLineHas(logs []byte, msg, traceID string) bool {
	for _, line := range strings.Split(string(logs), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil || l["msg"] != msg {
			continue
		}
		if l["trace_id"] == traceID && l["span_id"] != "" {
			return true
		}
	}
	return false
}

// summarize prints the trace as a tree of span names with their links
// and main tags, for the test log.
func summarize(tr jaegerTrace) string {
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s, %d spans\n", tr.TraceID, len(tr.Spans))
	for _, s := range tr.Spans {
		fmt.Fprintf(&b, "  span %s %q", s.SpanID, s.OperationName)
		for _, r := range s.References {
			fmt.Fprintf(&b, " %s→%s/%s", r.RefType, r.TraceID, r.SpanID)
		}
		b.WriteString("\n")
		for _, tg := range s.Tags {
			if strings.HasPrefix(tg.Key, "gen_ai.") || strings.HasPrefix(tg.Key, "agent_worker.") {
				fmt.Fprintf(&b, "      %s = %v\n", tg.Key, tg.Value)
			}
		}
	}
	return b.String()
}
