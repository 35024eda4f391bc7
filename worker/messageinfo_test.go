package worker

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/turnlog"
)

// near reports whether v, a float64 (or a JSON number), is want to within
// float rounding.
func near(v any, want float64) bool {
	f, ok := v.(float64)
	return ok && math.Abs(f-want) < 1e-9
}

// messageInfo is GET /v1/agents/triage/messages/{id} on replica h.
func (c *cluster) messageInfo(h, id string) (int, map[string]any) {
	c.t.Helper()
	code, body := c.call(h, http.MethodGet, "/v1/agents/triage/messages/"+id, "")
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		c.t.Fatalf("GET messages/%s on %s: %d %s", id, h, code, body)
	}
	return code, v
}

// waitMessage polls the lookup of id on h until its status is want.
func (c *cluster) waitMessage(h, id, want string) map[string]any {
	c.t.Helper()
	var v map[string]any
	wait.Within(c.t, deadline, "message "+id+" "+want, func() bool {
		_, v = c.messageInfo(h, id)
		return v["status"] == want
	})
	return v
}

// TestMessageLookupAndTurnsFromAStandby: asked on a standby replica, a
// message posted over the API reads queued (from the owner's inbox, over
// the control subject), then handled by its turn with the turn's text;
// messages rejected on NATS read dead_lettered with their reason; an
// unknown id is 404; and the turns API lists the turn with its message,
// tool calls, text and cost — all the owner's truth, from any replica.
func TestMessageLookupAndTurnsFromAStandby(t *testing.T) {
	t.Parallel()
	script := `[{call: {name: report_done, args: {summary: "rotated"}}, usage: {input: 1000, output: 10}}, {text: "certificates rotated on db-1", usage: {input: 2000, output: 20}}]`
	c := newCluster(t, 2, script, "", "")
	r1 := c.reps["r1"]

	if code, body := c.call("r2", http.MethodPost, "/v1/agents/triage/pause", ""); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, body)
	}
	code, body := c.call("r2", http.MethodPost, "/v1/agents/triage/messages", `{"text": "rotate the certificates", "id": "job-1"}`)
	if code != http.StatusAccepted || !strings.Contains(string(body), `"id":"job-1"`) {
		t.Fatalf("POST: %d %s", code, body)
	}
	v := c.waitMessage("r2", "job-1", "queued")
	if v["owner"] != "r1" || v["served_by"] != "r2" || v["kind"] != "inbox" || v["source"] != "nats:agents.triage.inbox" {
		t.Fatalf("queued: %v", v)
	}
	if code, body := c.call("r2", http.MethodPost, "/v1/agents/triage/resume", ""); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, body)
	}
	var turn map[string]any
	wait.Within(t, deadline, "job-1 handled with its turn's text", func() bool {
		_, v = c.messageInfo("r2", "job-1")
		turn, _ = v["turn"].(map[string]any)
		return v["status"] == "handled" && turn != nil && turn["recorded"] == true
	})
	if turn["n"] != 1.0 || turn["outcome"] != "completed" || turn["text"] != "certificates rotated on db-1" || !near(turn["cost_usd"], 0.03) {
		t.Fatalf("handled: %v", v)
	}

	// Rejected on NATS: invalid JSON, and a body over nats.max_message_bytes
	// (4096) whose envelope names its id.
	js, err := jetstream.New(r1.nc)
	if err != nil {
		t.Fatal(err)
	}
	for id, data := range map[string]string{
		"bad-1": `{"text": "unterminated`,
		"":      fmt.Sprintf(`{"id": "big-1", "text": %q}`, strings.Repeat("x", 5000)),
	} {
		m := nats.NewMsg("agents.triage.inbox")
		m.Data = []byte(data)
		if id != "" {
			m.Header.Set(nats.MsgIdHdr, id)
		}
		if _, err := js.PublishMsg(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	for id, reason := range map[string]string{"bad-1": "invalid_json", "big-1": "too_large"} {
		v := c.waitMessage("r2", id, "dead_lettered")
		dl, _ := v["dead_letter"].(map[string]any)
		if dl["reason"] != reason || dl["dlq"] != "agents.triage.dlq" || dl["detail"] == "" {
			t.Fatalf("%s: %v", id, v)
		}
	}

	code, v = c.messageInfo("r2", "nope")
	if code != http.StatusNotFound || v["status"] != "unknown" || v["error"] == "" {
		t.Fatalf("unknown id: %d %v", code, v)
	}

	code, body = c.call("r2", http.MethodGet, "/v1/agents/triage/turns?limit=5", "")
	var list struct {
		Agent string
		Turns []struct {
			N         uint64
			Outcome   string
			Text      string
			CostUSD   float64 `json:"cost_usd"`
			TokensIn  int     `json:"tokens_in"`
			Messages  []struct{ ID, Source string }
			ToolCalls []struct{ Name, Args, Outcome string } `json:"tool_calls"`
		}
	}
	if code != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Turns) != 1 {
		t.Fatalf("turns: %d %s", code, body)
	}
	tr := list.Turns[0]
	if tr.N != 1 || tr.Outcome != "completed" || tr.Text != "certificates rotated on db-1" || !near(tr.CostUSD, 0.03) || tr.TokensIn != 3000 ||
		len(tr.Messages) != 1 || tr.Messages[0].ID != "job-1" || len(tr.ToolCalls) != 1 ||
		tr.ToolCalls[0].Name != "report_done" || tr.ToolCalls[0].Args != `{"summary":"rotated"}` || tr.ToolCalls[0].Outcome != "ok" {
		t.Fatalf("turn: %s", body)
	}
	if code, body := c.call("r2", http.MethodGet, "/v1/agents/triage/turns?limit=0", ""); code != http.StatusBadRequest || !strings.Contains(string(body), `"error"`) {
		t.Fatalf("limit=0: %d %s", code, body)
	}
	// The turn log names the turn in the store, for a lookup after the
	// owner has forgotten the message.
	tl, found, err := turnlog.New(r1.w.Store(), nil).FindMessage(t.Context(), "triage", "job-1")
	if err != nil || !found || tl.N != 1 {
		t.Fatalf("turn log of job-1: %+v %v, %v", tl, found, err)
	}
}
