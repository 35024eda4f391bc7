package api_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/events"
)

// history makes alpha produce a run of events: pause, resume and the
// turn that follows.
func history(w *world) {
	w.wantStatus(w.post("/v1/agents/alpha/pause", ""), http.StatusOK)
	w.wantStatus(w.post("/v1/agents/alpha/resume", ""), http.StatusOK)
	w.waitEvent("alpha", "turn-completed")
}

// retained returns the bus's retained events after seq that keep says to.
func retained(w *world, after uint64, keep func(events.Event) bool) []events.Event {
	all, _ := w.bus.Since(after)
	var out []events.Event
	for _, e := range all {
		if keep == nil || keep(e) {
			out = append(out, e)
		}
	}
	return out
}

func expectFrames(t *testing.T, s *stream, want []events.Event) {
	t.Helper()
	for _, e := range want {
		f := s.next()
		if f.id != strconv.FormatUint(e.Seq, 10) || f.event != e.Type {
			t.Fatalf("frame id=%s event=%s, want id=%d event=%s", f.id, f.event, e.Seq, e.Type)
		}
		if got := f.eventData(t); got.Seq != e.Seq || got.Agent != e.Agent || got.Type != e.Type {
			t.Fatalf("frame data %s, want %+v", f.data, e)
		}
	}
}

func TestEventsReplayAfterLastEventIDThenLive(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	// Something for the other agent, which alpha's stream must not show.
	w.wantStatus(w.post("/v1/agents/beta/messages", `{"text": "later", "wake": false}`), http.StatusAccepted)
	history(w)
	alphaOnly := func(e events.Event) bool { return e.Agent == "alpha" }
	all := retained(w, 0, alphaOnly)
	if len(all) < 4 {
		t.Fatalf("only %d alpha events retained", len(all))
	}
	from := all[1].Seq // replay everything after the second event

	s := w.openStream("/v1/agents/alpha/events", map[string]string{"Last-Event-ID": strconv.FormatUint(from, 10)})
	expectFrames(t, s, retained(w, from, alphaOnly))

	w.wantStatus(w.post("/v1/agents/alpha/pause", ""), http.StatusOK)
	f := s.next()
	if f.event != events.Paused || f.eventData(t).Agent != "alpha" {
		t.Fatalf("live frame %+v", f)
	}
}

func TestEventsReplaySinceQueryForEveryAgent(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	history(w)
	w.wantStatus(w.post("/v1/agents/beta/messages", `{"text": "later", "wake": false}`), http.StatusAccepted)
	s := w.openStream("/v1/events?since=2", nil)
	want := retained(w, 2, nil)
	if want[len(want)-1].Agent != "beta" {
		t.Fatalf("the last retained event is not beta's: %+v", want[len(want)-1])
	}
	expectFrames(t, s, want)
}

func TestEventsWithoutResumePointAreLiveOnly(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	history(w)
	s := w.openStream("/v1/agents/alpha/events", nil)
	w.wantStatus(w.post("/v1/agents/alpha/pause", ""), http.StatusOK)
	if f := s.next(); f.event != events.Paused {
		t.Fatalf("first frame of a live stream is %q: history was replayed", f.event)
	}
}

func TestEventsSayGapWhenTheRingLostSome(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{Events: events.NewBus(4, nil)})
	history(w)
	kept := retained(w, 0, nil)
	if len(kept) != 4 || kept[0].Seq <= 2 {
		t.Fatalf("ring holds %d events from seq %d", len(kept), kept[0].Seq)
	}
	s := w.openStream("/v1/events?since=1", nil)
	f := s.next()
	if f.event != api.EventGap || f.id != "" {
		t.Fatalf("first frame %+v, want a gap without an id", f)
	}
	var gap struct {
		After    uint64 `json:"after"`
		FirstSeq uint64 `json:"first_seq"`
	}
	if err := json.Unmarshal([]byte(f.data), &gap); err != nil || gap.After != 1 || gap.FirstSeq != kept[0].Seq {
		t.Fatalf("gap data %s (%v), want first_seq %d", f.data, err, kept[0].Seq)
	}
	expectFrames(t, s, kept)
}

func TestEventsRejectABadResumePoint(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	r := w.get("/v1/events?since=yesterday")
	w.wantStatus(r, http.StatusBadRequest)
	r.errorText(t)
}

func TestEventsHeartbeat(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{Clock: clock.Real(), Heartbeat: 10 * time.Millisecond})
	s := w.openStream("/v1/agents/alpha/events", nil)
	timeout := time.After(deadline)
	for beats := 0; beats < 2; {
		select {
		case f, ok := <-s.frames:
			if !ok {
				t.Fatal("stream ended")
			}
			if f.comment == "heartbeat" {
				beats++
			}
		case <-timeout:
			t.Fatal("no heartbeat comment")
		}
	}
}
