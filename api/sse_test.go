package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/events"
)

// history makes alpha produce a run of events: pause, resume with a
// message and the turn that follows.
func history(w *world) {
	w.wantStatus(w.post("/v1/agents/alpha/pause", ""), http.StatusOK)
	w.wantStatus(w.post("/v1/agents/alpha/resume", `{"message": "carry on"}`), http.StatusOK)
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

// An id beyond the newest event in the ring is from before a restart (in
// core-NATS mode ids start over with the process): the stream says gap,
// with a first_seq not above the id, and replays what the ring holds
// rather than skipping events until the ids catch up.
func TestEventsFromAnIDOfAnEarlierProcessSayGapAndReplay(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	history(w)
	kept := retained(w, 0, nil)
	s := w.openStream("/v1/events", map[string]string{"Last-Event-ID": "100000"})
	f := s.next()
	var gap events.Gap
	if err := json.Unmarshal([]byte(f.data), &gap); f.event != api.EventGap || err != nil || gap.After != 100000 || gap.FirstSeq != 1 {
		t.Fatalf("first frame %+v, want a gap after 100000 from 1", f)
	}
	expectFrames(t, s, kept)
}

// feed is an EventFeed of its own bus (another replica's events, as the
// durable events stream would carry them), or one that cannot be read.
type feed struct {
	bus *events.Bus
	err error
}

func (f feed) Follow(ctx context.Context, fl events.Follow) (events.Tail, error) {
	if f.err != nil {
		return nil, f.err
	}
	return f.bus.Follow(ctx, fl)
}

// With an EventFeed the streams read it, not the local bus, and keep
// their agent scoping: the per-agent route shows that agent's events, and
// a scoped token sees only its agents' on /v1/events.
func TestEventsFromAnEventFeedKeepTheirScope(t *testing.T) {
	t.Parallel()
	remote := events.NewBus(0, nil)
	w := newWorld(t, api.Options{EventFeed: feed{bus: remote}, Tokens: append(slices.Clone(tokens),
		api.Token{Name: "beta-reader", Role: api.RoleRead, Value: "beta-only-3b1d", Agents: []string{"beta"}})})
	remote.Publish(events.Event{Agent: "alpha", Type: events.Paused, Replica: "r2"})
	remote.Publish(events.Event{Agent: "beta", Type: events.Paused, Replica: "r2"})
	w.wantStatus(w.post("/v1/agents/alpha/pause", ""), http.StatusOK) // local: not in the feed

	alpha := w.openStream("/v1/agents/alpha/events?since=0", nil)
	if e := alpha.next().eventData(t); e.Seq != 1 || e.Agent != "alpha" || e.Replica != "r2" {
		t.Fatalf("alpha's stream starts with %+v", e)
	}
	scoped := w.openStream("/v1/events?since=0", map[string]string{"Authorization": "Bearer beta-only-3b1d"})
	if e := scoped.next().eventData(t); e.Seq != 2 || e.Agent != "beta" {
		t.Fatalf("beta-reader's stream starts with %+v", e)
	}
	remote.Publish(events.Event{Agent: "alpha", Type: events.Resumed})
	remote.Publish(events.Event{Agent: "beta", Type: events.Resumed})
	if e := scoped.next().eventData(t); e.Seq != 4 || e.Agent != "beta" {
		t.Fatalf("beta-reader's live event %+v", e)
	}
	if e := alpha.next().eventData(t); e.Seq != 3 || e.Type != events.Resumed {
		t.Fatalf("alpha's live event %+v: the local pause leaked in, or the feed's resume is missing", e)
	}
}

func TestEventsAnswer503WhenTheFeedCannotBeRead(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{EventFeed: feed{err: errors.New("stream AGENTS_EVENTS not found")}})
	r := w.get("/v1/events?since=3")
	w.wantStatus(r, http.StatusServiceUnavailable)
	if msg := r.errorText(t); !strings.Contains(msg, "AGENTS_EVENTS not found") {
		t.Fatalf("503 says %q", msg)
	}
}
