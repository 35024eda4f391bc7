package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// approvals lists the pending calls as a table; approve and deny post the
// decision, with the reason, to the agent's approval.
func TestApprovalVerbs(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var posted []string
	now := time.Now().UTC()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/agents/oncall/approvals":
			_ = json.NewEncoder(w).Encode([]map[string]any{{"id": "oncall-t4-call_1", "agent": "oncall", "tool": "restart_deployment",
				"args": map[string]any{"name": "api"}, "turn": 4, "requested": now.Add(-time.Minute), "expires": now.Add(59 * time.Minute)}})
		case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/agents/oncall/approvals/"):
			var body struct {
				Reason string `json:"reason"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			mu.Lock()
			posted = append(posted, r.URL.Path+" "+body.Reason)
			mu.Unlock()
			if strings.HasSuffix(r.URL.Path, "/nope/approve") {
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"error": "no pending approval with that id"}`))
				return
			}
			_, _ = w.Write([]byte(`{"decision": "approved"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	var out, errb syncBuffer
	if code := execute(context.Background(), []string{"approvals", "oncall", "--api", srv.URL}, &out, &errb); code != exitOK {
		t.Fatalf("approvals: exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"oncall-t4-call_1", `restart_deployment {"name":"api"}`, "1m", "59m"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("approvals output lacks %q:\n%s", want, out.String())
		}
	}
	if code := execute(context.Background(), []string{"approve", "oncall", "oncall-t4-call_1", "--reason", "api is down", "--api", srv.URL}, &out, &errb); code != exitOK {
		t.Fatalf("approve: exit %d: %s", code, errb.String())
	}
	if code := execute(context.Background(), []string{"deny", "oncall", "x2", "--api", srv.URL}, &out, &errb); code != exitOK {
		t.Fatalf("deny: exit %d: %s", code, errb.String())
	}
	var missing syncBuffer
	if code := execute(context.Background(), []string{"approve", "oncall", "nope", "--api", srv.URL}, &out, &missing); code == exitOK || !strings.Contains(missing.String(), "no pending approval") {
		t.Fatalf("approve of an unknown id: exit %d: %s", code, missing.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "/v1/agents/oncall/approvals/oncall-t4-call_1/approve api is down|/v1/agents/oncall/approvals/x2/deny |/v1/agents/oncall/approvals/nope/approve "; strings.Join(posted, "|") != want {
		t.Fatalf("posted %q", posted)
	}
}

// TestApprovalsJSONIsAnObject: approvals -o json prints {"agent",
// "approvals": [...]} as the other lists print objects, with each approval
// as the API sent it and [] for none. On the old code it printed the API's
// bare array (or null).
func TestApprovalsJSONIsAnObject(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/agents/oncall/approvals":
			_, _ = w.Write([]byte(`[{"id": "oncall-t4-call_1", "agent": "oncall", "tool": "restart_deployment", "turn": 4}]`))
		case "/v1/agents/quiet/approvals":
			_, _ = w.Write([]byte(`null`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		agent string
		ids   []string
	}{{"oncall", []string{"oncall-t4-call_1"}}, {"quiet", []string{}}} {
		out, errs, code := run(testEnv(nil), "approvals", c.agent, "-o", "json", "--api", srv.URL)
		if code != exitOK {
			t.Fatalf("%s: exit %d: %s", c.agent, code, errs)
		}
		var got struct {
			Agent     string `json:"agent"`
			Approvals []struct {
				ID   string `json:"id"`
				Tool string `json:"tool"`
			} `json:"approvals"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: not an {agent, approvals} object: %v\n%s", c.agent, err, out)
		}
		ids := []string{}
		for _, a := range got.Approvals {
			ids = append(ids, a.ID)
		}
		if got.Agent != c.agent || strings.Join(ids, ",") != strings.Join(c.ids, ",") || !strings.Contains(out, `"approvals": [`) {
			t.Errorf("%s: printed\n%s", c.agent, out)
		}
	}
}
