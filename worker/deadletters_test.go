package worker

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// A dead letter is kept: still readable from the API after the worker
// restarts, and a replay puts it back in the agent's inbox once (a turn
// handles it; a second replay is 404).
func TestADeadLetterIsKeptAndReplayedOnce(t *testing.T) {
	t.Parallel()
	s := setup{dataDir: t.TempDir()}
	rec := newRecorder()
	r := start(t, writeConfig(t, s), rec, nil)
	api := "http://" + r.w.APIAddr()
	post := func(path, body string) int {
		t.Helper()
		resp, err := http.Post(api+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/v1/agents/triage/pause", `{}`); code != http.StatusOK {
		t.Fatalf("pause: %d", code)
	}
	r.publish("agents.triage.inbox", `{"text": "please check disk on db-1", "id": "disk-1"}`)
	r.waitEvent("message-queued")
	if code := post("/v1/agents/triage/resume", `{"drop_queued": true}`); code != http.StatusOK {
		t.Fatalf("resume: %d", code)
	}
	r.waitEvent("message-rejected")
	r.stop()

	r2 := start(t, writeConfig(t, s), rec, nil)
	api = "http://" + r2.w.APIAddr()
	var list struct {
		DeadLetters []struct {
			Seq    uint64 `json:"seq"`
			ID     string `json:"id"`
			Reason string `json:"reason"`
			Body   string `json:"body"`
		} `json:"dead_letters"`
	}
	resp, err := http.Get(api + "/v1/agents/triage/dlq")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || len(list.DeadLetters) != 1 {
		t.Fatalf("dlq after the restart: %d %+v %v", resp.StatusCode, list, err)
	}
	dl := list.DeadLetters[0]
	if dl.ID != "disk-1" || dl.Reason != "operator_dropped" || !strings.Contains(dl.Body, "please check disk on db-1") {
		t.Fatalf("dead letter %+v", dl)
	}
	seq := strconv.FormatUint(dl.Seq, 10)
	if code := post("/v1/agents/triage/dlq/"+seq+"/replay", `{"reason": "disk is back"}`); code != http.StatusOK {
		t.Fatalf("replay: %d", code)
	}
	r2.waitEvent("turn-completed")
	if n := strings.Count(rec.all(), "please check disk on db-1"); n != 1 {
		t.Fatalf("the replayed message reached %d turns, want 1:\n%s", n, rec.all())
	}
	if code := post("/v1/agents/triage/dlq/"+seq+"/replay", `{}`); code != http.StatusNotFound {
		t.Fatalf("a second replay: %d, want 404", code)
	}
}
