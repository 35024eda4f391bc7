package worker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// publishJS publishes through JetStream and waits for the stream's ack,
// so the message is stored whether or not a worker runs.
func (r *running) publishJS(subject, id, body string) {
	r.t.Helper()
	if _, err := r.js().Publish(r.t.Context(), subject, []byte(body)); err != nil {
		r.t.Fatalf("publish %s: %v", id, err)
	}
}

func TestDeferredBacklogNeverBlocksAWakeMessage(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	s := setup{dataDir: dataDir, agent: "    inbox: {cap: 10}"}
	rec := newRecorder()
	r := start(t, writeConfig(t, s), rec, nil)
	// Three times the inbox cap of deferred messages: more than the
	// worker may hold.
	for i := range 30 {
		id := fmt.Sprintf("d-%02d", i)
		r.publishJS("agents.triage.deferred", id, fmt.Sprintf(`{"text": "background %s", "id": %q}`, id, id))
	}
	a := r.agent()
	wait.Within(t, deadline, "deferred messages delivered up to the cap", func() bool { return a.Status().Deferred == 10 })
	r.publishJS("agents.triage.inbox", "w-1", `{"text": "PAGE: payments down", "id": "w-1"}`)
	e := r.waitEvent(events.TurnCompleted)
	if ids := fmt.Sprint(e.Data["ids"]); !strings.Contains(ids, "w-1") {
		t.Fatalf("the first turn handled %v, not the wake message", ids)
	}
	// The backlog rides along with later turns, a cap's worth at a time,
	// and nothing is dropped.
	handled := map[string]bool{}
	for _, id := range e.Data["ids"].([]string) {
		handled[id] = true
	}
	for n := 2; len(handled) < 31; n++ {
		r.publishJS("agents.triage.inbox", fmt.Sprintf("w-%d", n), fmt.Sprintf(`{"text": "poke %d", "id": "w-%d"}`, n, n))
		e := r.waitEvent(events.TurnCompleted)
		for _, id := range e.Data["ids"].([]string) {
			if strings.HasPrefix(id, "d-") && handled[id] {
				t.Fatalf("%s handled twice", id)
			}
			handled[id] = true
		}
		if n > 20 {
			t.Fatalf("backlog not worked off after %d turns: %d of 30 deferred handled", n, len(handled)-n)
		}
	}
}

func TestLargeBatchFromAPauseIsHandledNotDeadLettered(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	r := start(t, writeConfig(t, setup{maxBody: 65536}), rec, nil)
	rejected := r.w.Events().Subscribe(100, func(e events.Event) bool {
		return e.Type == events.MessageDropped || e.Type == events.MessageRejected
	})
	a := r.agent()
	a.Pause()
	body := strings.Repeat("log line: disk io wait high on db-1\n", 50<<10/36)
	for i := range 25 {
		id := fmt.Sprintf("big-%02d", i)
		r.publishJS("agents.triage.inbox", id, fmt.Sprintf(`{"text": %q, "id": %q}`, body, id))
	}
	wait.Within(t, deadline, "25 messages queued behind the pause", func() bool { return a.Status().InboxPending == 25 })
	if err := a.Resume(""); err != nil {
		t.Fatal(err)
	}
	handled := 0
	for handled < 25 {
		e := r.waitEvent(events.TurnCompleted)
		handled += len(e.Data["ids"].([]string))
	}
	select {
	case e := <-rejected.C:
		t.Fatalf("a message of the batch was dropped or dead-lettered: %v", e)
	default:
	}
	hist, err := r.w.Store().Tail(t.Context(), "history.agent-worker.triage.triage", 0)
	if err != nil || len(hist) == 0 {
		t.Fatalf("history: %d records, %v", len(hist), err)
	}
	for i, rec := range hist {
		if len(rec) > 512<<10 {
			t.Errorf("history record %d is %d bytes", i, len(rec))
		}
	}
}

// js is a JetStream context on the test's own connection.
func (r *running) js() jetstream.JetStream {
	r.t.Helper()
	js, err := jetstream.New(r.nc)
	if err != nil {
		r.t.Fatal(err)
	}
	return js
}
