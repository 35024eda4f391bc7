package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/api"
)

// The traceparent of an HTTP request that queues a message rides with the
// message (the turn that drains it links to the sender's trace); a
// malformed one is left behind, and the message is queued all the same.
func TestRequestTraceParentRidesWithTheMessage(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	d := &deliveries{}
	w := newWorld(t, api.Options{Deliver: d.deliver})
	send := func(path, body, traceparent string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, w.ts.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+operateToken)
		req.Header.Set("traceparent", traceparent)
		resp, err := w.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST %s: %s", path, resp.Status)
		}
	}
	send("/v1/agents/alpha/messages", `{"text": "traced", "id": "t-1"}`, tp)
	send("/v1/agents/alpha/messages", `{"text": "not traced", "id": "t-2"}`, "00-nonsense")
	send("/v1/alertmanager/alpha", notification(t, alert("fp-1", 1, false)), tp)
	msgs := d.all()
	if len(msgs) != 3 {
		t.Fatalf("%d messages delivered, want 3", len(msgs))
	}
	for i, want := range []string{tp, "", tp} {
		if msgs[i].TraceParent != want {
			t.Errorf("message %d (%s) TraceParent = %q, want %q", i, msgs[i].ID, msgs[i].TraceParent, want)
		}
	}
}
