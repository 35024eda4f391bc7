package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/events"
)

// A message posted with "steer": true is operator text: an ingest token
// may queue messages but not steer (403); a steer takes text only (400);
// with no turn running it wakes the agent as the operator's message (202
// "woke", a wake event that names the token), and behind a pause it is
// refused (409) rather than kept.
func TestSteeredMessageNeedsOperateAndWakesAnIdleAgent(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{Tokens: withTokens(api.Token{Name: "am", Role: api.RoleIngest, Value: ingestToken})})
	r := w.call(http.MethodPost, "/v1/agents/alpha/messages", ingestToken, "application/json", `{"text": "stop paging", "steer": true}`)
	w.wantStatus(r, http.StatusForbidden)
	if msg := r.errorText(t); !strings.Contains(msg, "operate") {
		t.Fatalf("403 says %q", msg)
	}
	w.wantStatus(w.post("/v1/agents/alpha/messages", `{"text": "stop paging", "steer": true, "id": "x-1"}`), http.StatusBadRequest)
	if n := w.models["alpha"].Calls(); n != 0 {
		t.Fatalf("a refused steer ran %d model calls", n)
	}

	r = w.post("/v1/agents/alpha/messages", `{"text": "stop paging", "steer": true}`)
	w.wantStatus(r, http.StatusAccepted)
	m := r.json(t)
	if m["status"] != "woke" || m["woke"] != true || !strings.HasPrefix(m["id"].(string), "steer-") {
		t.Fatalf("steer of an idle agent: %s", r.body)
	}
	wake := w.waitEvent("alpha", events.Wake)
	if wake.Data["source"] != "operator" || wake.Data["by"] != "ops" || wake.Data["steer"] != true {
		t.Fatalf("wake %v", wake.Data)
	}
	w.waitTurnDone("alpha")

	w.wantStatus(w.post("/v1/agents/alpha/pause", ""), http.StatusOK)
	r = w.post("/v1/agents/alpha/messages", `{"text": "and this", "steer": true}`)
	w.wantStatus(r, http.StatusConflict)
	if msg := r.errorText(t); !strings.Contains(msg, "paused") {
		t.Fatalf("409 says %q", msg)
	}
}
