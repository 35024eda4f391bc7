package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// sse is an event stream of a worker's API, read on its own goroutine.
type sse struct {
	t      *testing.T
	frames chan sseFrame
}

// sseFrame is one frame: an event (id, type, data) or a gap (no id).
type sseFrame struct {
	id, event, data string
}

// openSSE opens GET path on the API at addr with the given headers.
func openSSE(t *testing.T, addr, path string, header map[string]string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		resp.Body.Close()
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	s := &sse{t: t, frames: make(chan sseFrame, 1000)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(s.frames)
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		var f sseFrame
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			switch line = strings.TrimRight(line, "\r\n"); {
			case line == "":
				if f.event != "" {
					s.frames <- f
				}
				f = sseFrame{}
			case strings.HasPrefix(line, "id: "):
				f.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				f.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				f.data = line[6:]
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// next returns the next event frame, decoded; gaps fail the test.
func (s *sse) next() events.Event {
	s.t.Helper()
	select {
	case f, ok := <-s.frames:
		if !ok {
			s.t.Fatal("event stream ended")
		}
		var e events.Event
		if err := json.Unmarshal([]byte(f.data), &e); err != nil || f.id != strconv.FormatUint(e.Seq, 10) {
			s.t.Fatalf("frame %+v: id and data disagree (%v)", f, err)
		}
		return e
	case <-time.After(deadline):
		s.t.Fatal("no event on the stream")
	}
	return events.Event{}
}

// until returns the next event of agent with type typ, and every event
// before it.
func (s *sse) until(agent, typ string) (events.Event, []events.Event) {
	s.t.Helper()
	var before []events.Event
	for {
		e := s.next()
		if e.Agent == agent && e.Type == typ {
			return e, before
		}
		before = append(before, e)
	}
}

// A client that saw events before the worker restarted resumes after its
// last id from the restarted worker (same data directory, so the same
// embedded JetStream): it gets the events it missed with the ids they had,
// then new ones with higher ids — with no gap. On the old ring, the
// restarted worker held nothing of the first run.
func TestEventsReplayAfterAWorkerRestartViaLastEventID(t *testing.T) {
	t.Parallel()
	const limits = "events: {max_age: 1h, max_bytes: 2097152}\n"
	s := setup{dataDir: t.TempDir(), top: limits + "lease: {holder: first}\n"}
	r := start(t, writeConfig(t, s), newRecorder(), nil)
	info, err := r.js().Stream(context.Background(), "AGENTS_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	if cfg := info.CachedInfo().Config; cfg.MaxAge != time.Hour || cfg.MaxBytes != 2<<20 || cfg.Subjects[0] != "agents.*.events.>" {
		t.Fatalf("events stream: max_age %v, max_bytes %d, subjects %v", cfg.MaxAge, cfg.MaxBytes, cfg.Subjects)
	}
	first := openSSE(t, r.w.APIAddr(), "/v1/agents/triage/events?since=0", nil)
	r.publish("agents.triage.inbox", "disk full on db-1")
	started, _ := first.until("triage", events.TurnStarted)
	completed, between := first.until("triage", events.TurnCompleted)
	if started.Replica != "first" || completed.Seq <= started.Seq {
		t.Fatalf("turn-started %+v, turn-completed %+v", started, completed)
	}
	r.stop()

	s.top = limits + "lease: {holder: second}\n"
	r2 := start(t, writeConfig(t, s), newRecorder(), nil)
	resumed := openSSE(t, r2.w.APIAddr(), "/v1/agents/triage/events", map[string]string{"Last-Event-ID": strconv.FormatUint(started.Seq, 10)})
	for _, want := range append(between, completed) {
		if got := resumed.next(); got.Seq != want.Seq || got.Type != want.Type || got.Replica != "first" {
			t.Fatalf("replayed %+v, want %+v", got, want)
		}
	}
	r2.publish("agents.triage.inbox", "and db-2")
	again, _ := resumed.until("triage", events.TurnCompleted)
	if again.Seq <= completed.Seq || again.Replica != "second" {
		t.Fatalf("after the restart turn-completed %+v; before it %+v", again, completed)
	}
}

// Two replicas on one NATS: the agent runs on r1, and an event stream on
// r2 shows its events (for every agent, and for that agent). r2's metrics
// do not count them: only the owner counts its turns.
func TestEventStreamOnAnyReplicaShowsEveryAgentsEvents(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, "", "", "")
	all := openSSE(t, c.reps["r2"].w.APIAddr(), "/v1/events", nil)
	one := openSSE(t, c.reps["r2"].w.APIAddr(), "/v1/agents/triage/events", nil)
	c.reps["r1"].publish("agents.triage.inbox", "disk full on db-1")
	for _, s := range []*sse{all, one} {
		e, _ := s.until("triage", events.TurnCompleted)
		if e.Replica != "r1" {
			t.Fatalf("r2 streamed %+v, want r1's", e)
		}
	}
	turns := func(h string) float64 {
		return value(t, scrape(t, c.reps[h]), "agent_worker_turns_total", map[string]string{"agent": "triage", "outcome": "completed"})
	}
	wait.Within(t, deadline, "r1 counts its turn", func() bool { return turns("r1") == 1 })
	if n := turns("r2"); n != 0 {
		t.Fatalf("r2 counted %v turns of an agent it does not run", n)
	}
	for h, r := range c.reps {
		if v := value(t, scrape(t, r), "agent_worker_events_dropped_total", map[string]string{"reason": "stream_failed"}); v != 0 {
			t.Fatalf("%s: %v events not stored", h, v)
		}
	}
}

// In core NATS mode there is no events stream: the API streams from the
// replica's own ring, and replays from it.
func TestCoreNATSModeServesEventsFromTheRing(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, setup{top: "store: {url: \"memory://\"}\n"})
	off := false
	cfg.NATS.JetStream = &off
	r := start(t, cfg, newRecorder(), nil)
	if r.w.EventStream() != nil {
		t.Fatal("an events stream in core NATS mode")
	}
	live := openSSE(t, r.w.APIAddr(), "/v1/events", nil)
	r.publish("agents.triage.inbox", "core hello")
	completed, _ := live.until("triage", events.TurnCompleted)
	if completed.Replica != "" {
		t.Fatalf("a ring event carries a replica: %+v", completed)
	}
	ring, _ := r.w.Events().Since(0)
	replay := openSSE(t, r.w.APIAddr(), "/v1/events?since=0", nil)
	for _, want := range ring {
		if got := replay.next(); got.Seq != want.Seq || got.Type != want.Type {
			t.Fatalf("replayed %+v, want %+v", got, want)
		}
	}
	if _, ok := value2(scrape(t, r), "agent_worker_events_dropped_total", "stream_failed"); ok {
		t.Fatal("stream_failed reported without a stream")
	}
}

// value2 reports the events_dropped_total sample with reason, if any.
func value2(fams map[string]*dto.MetricFamily, name, reason string) (float64, bool) {
	fam, ok := fams[name]
	if !ok {
		return 0, false
	}
	for _, m := range fam.Metric {
		for _, l := range m.Label {
			if l.GetName() == "reason" && l.GetValue() == reason {
				return m.Counter.GetValue(), true
			}
		}
	}
	return 0, false
}
