package worker

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// readyz fetches /readyz. The client gives up after a second: a readiness
// check that hangs is itself the failure a probe can't see past.
func readyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestRedisOutageHoldsTurnsWithoutModelCallsAndLosesNothing(t *testing.T) {
	t.Parallel()
	addr, redis := startRedisProc(t)
	rec := newRecorder()
	r := start(t, writeConfig(t, setup{top: fmt.Sprintf("store: {url: \"redis://%s/0\"}\n", addr)}), rec, nil)
	dropped := r.w.Events().Subscribe(100, func(e events.Event) bool {
		return e.Type == events.MessageDropped || e.Type == events.MessageRejected
	})
	r.publish("agents.triage.inbox", `{"text": "before the outage", "id": "m-1"}`)
	r.waitEvent(events.TurnCompleted)
	if code, body := readyz(t, r.w.APIAddr()); code != http.StatusOK {
		t.Fatalf("readyz before the outage: %d %s", code, body)
	}

	if err := redis.Process.Signal(syscall.SIGSTOP); err != nil { // hung, not refused
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = redis.Process.Signal(syscall.SIGCONT) })
	wait.Within(t, deadline, "/readyz to report the store", func() bool {
		code, body := readyz(t, r.w.APIAddr())
		return code == http.StatusServiceUnavailable && strings.Contains(body, "store")
	})
	calls := rec.calls()
	r.publish("agents.triage.inbox", `{"text": "during the outage", "id": "m-2"}`)
	a := r.agent()
	wait.Within(t, deadline, "the agent to wait for the store", func() bool {
		s := a.Status()
		return s.State == driver.Waiting && strings.Contains(s.WaitingFor, "store") && s.InboxPending == 1
	})
	if n := rec.calls(); n != calls {
		t.Fatalf("%d model calls while the store was down", n-calls)
	}

	if err := redis.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	e := r.waitEvent(events.TurnCompleted)
	if ids := fmt.Sprint(e.Data["ids"]); !strings.Contains(ids, "m-2") {
		t.Fatalf("the turn after the outage handled %v, want m-2", ids)
	}
	wait.Within(t, deadline, "/readyz to recover", func() bool { code, _ := readyz(t, r.w.APIAddr()); return code == http.StatusOK })
	select {
	case e := <-dropped.C:
		t.Fatalf("a message was dropped or dead-lettered because of the outage: %v", e)
	default:
	}
}
