package worker

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/agent-worker/agent-worker/events"
)

// http_get_allow_private reaches the agent's tool: by default the tool
// refuses a loopback server (and never calls it); opted in, it reads it.
func TestHTTPGetAllowPrivateReachesTheTool(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprint("allow_private=", allow), func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				fmt.Fprint(w, "all green")
			}))
			defer srv.Close()
			s := setup{
				tools:  "[http_get]",
				agent:  fmt.Sprintf("    http_get: [%q]\n    http_get_allow_private: %t", srv.URL+"/api/", allow),
				script: fmt.Sprintf(`[{call: {name: http_get, args: {url: %q}}}, {text: "read it"}]`, srv.URL+"/api/status"),
			}
			r := start(t, writeConfig(t, s), newRecorder(), nil)
			r.publish("agents.triage.inbox", "check the status page")
			r.waitEvent(events.TurnCompleted)
			want := int32(0)
			if allow {
				want = 1
			}
			if got := hits.Load(); got != want {
				t.Fatalf("the loopback server got %d requests, want %d", got, want)
			}
		})
	}
}
