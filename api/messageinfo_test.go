package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/turnlog"
)

// lookup is GET /v1/agents/alpha/messages/{id} as an api.MessageInfo.
func (w *world) lookup(id string) (int, api.MessageInfo) {
	w.t.Helper()
	r := w.get("/v1/agents/alpha/messages/" + id)
	var info api.MessageInfo
	decode(w.t, r.body, &info)
	return r.status, info
}

// A message posted over the API reads queued while the agent is paused,
// then handled by its turn, with the turn's outcome and text; a message
// posted without an id is found under the id the 202 named.
func TestMessageLookupQueuedThenHandled(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{Holder: "replica-1"})
	w.wantStatus(w.post("/v1/agents/alpha/pause", ""), http.StatusOK)
	w.wantStatus(w.post("/v1/agents/alpha/messages", `{"text": "disk full on db-1", "id": "m-1"}`), http.StatusAccepted)
	r := w.post("/v1/agents/alpha/messages", `{"text": "and db-2", "wake": false}`)
	w.wantStatus(r, http.StatusAccepted)
	generated, _ := r.json(t)["id"].(string)
	if !strings.HasPrefix(generated, "api-") {
		t.Fatalf("202 without the made-up id: %s", r.body)
	}

	code, info := w.lookup("m-1")
	if code != http.StatusOK || info.Status != api.MessageQueued || info.Kind != "inbox" || info.Source != api.SourceAPI ||
		info.Received == nil || info.Owner != "replica-1" || info.Turn != nil || info.Agent != "alpha" || info.ID != "m-1" {
		t.Fatalf("queued: %d %+v", code, info)
	}
	if _, info := w.lookup(generated); info.Status != api.MessageQueued || info.Kind != "deferred" {
		t.Fatalf("%s: %+v", generated, info)
	}

	w.wantStatus(w.post("/v1/agents/alpha/resume", ""), http.StatusOK)
	w.waitTurnDone("alpha")
	for _, id := range []string{"m-1", generated} {
		wait.For(t, id+" handled by a recorded turn", func() bool {
			_, info = w.lookup(id)
			return info.Status == api.MessageHandled && info.Turn != nil && info.Turn.Recorded
		})
		if tr := info.Turn; tr.N != 1 || tr.Outcome != "completed" || tr.Text != "all quiet" || tr.Started == nil {
			t.Fatalf("%s: turn %+v", id, tr)
		}
	}
}

// A dead-letter record answers dead_lettered with its reason; an id
// nobody knows is 404 with status unknown.
func TestMessageLookupDeadLetteredAndUnknown(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	log := w.driver.TurnLog()
	log.DeadLetter("alpha", turnlog.DeadLetter{ID: "bad-1", Reason: "invalid_json", Detail: "unexpected end of JSON input",
		Subject: "agents.alpha.inbox", DLQ: "agents.alpha.dlq", At: time.Now()}, 0)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	code, info := w.lookup("bad-1")
	if code != http.StatusOK || info.Status != api.MessageDeadLettered || info.DeadLetter == nil ||
		info.DeadLetter.Reason != "invalid_json" || info.DeadLetter.DLQ != "agents.alpha.dlq" {
		t.Fatalf("dead-lettered: %d %+v", code, info)
	}
	r := w.get("/v1/agents/alpha/messages/nobody-knows")
	w.wantStatus(r, http.StatusNotFound)
	if m := r.json(t); m["status"] != "unknown" || !strings.Contains(r.errorText(t), `no message "nobody-knows"`) {
		t.Fatalf("unknown: %s", r.body)
	}
	// Another agent's record is not this agent's.
	if code, _ := w.call(http.MethodGet, "/v1/agents/beta/messages/bad-1", readToken, "", "").status, 0; code != http.StatusNotFound {
		t.Fatalf("beta/bad-1: %d", code)
	}
}
