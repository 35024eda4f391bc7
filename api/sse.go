package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/agent-worker/agent-worker/events"
)

// sseBuffer is how many live events a stream may fall behind before the
// bus drops some for it; the stream then recovers them from the bus's
// ring, or says "gap".
const sseBuffer = 256

// EventGap is the type of the stream event that says events were lost:
// the ring no longer held everything after the requested sequence number.
// Its data is {"after": <requested seq>, "first_seq": <first available>}.
const EventGap = "gap"

func (s *Server) agentEvents(w http.ResponseWriter, r *http.Request) {
	a, ok := s.agent(w, r)
	if !ok {
		return
	}
	name := a.Name()
	s.stream(w, r, func(e events.Event) bool { return e.Agent == name })
}

// allEvents streams the events of every agent the caller may see.
func (s *Server) allEvents(w http.ResponseWriter, r *http.Request) {
	var filter func(events.Event) bool
	if who := record(r).who; len(who.agents) > 0 {
		filter = func(e events.Event) bool { return who.mayAccess(e.Agent) }
	}
	s.stream(w, r, filter)
}

// stream serves Server-Sent Events: each event as "id: <seq>", "event:
// <type>", "data: <events.Event as JSON>". With a Last-Event-ID header (or
// else ?since=<seq>) it first replays the retained events after that
// sequence number, preceded by a "gap" event if the ring lost some; then
// live events, and a ": heartbeat" comment every Heartbeat. It ends when
// the client goes, at Shutdown, or when SetTokens takes away the token it
// was opened with.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, filter func(events.Event) bool) {
	since, replay, err := resumePoint(r)
	if err != nil {
		fail(w, r, http.StatusBadRequest, "%v", err)
		return
	}
	if !replay {
		// Live only: start after the newest event so far. A later
		// recovery from the ring (after drops) must not replay history.
		if evs, _ := s.bus.Since(0); len(evs) > 0 {
			since = evs[len(evs)-1].Seq
		}
	}
	rc := http.NewResponseController(w)
	// Subscribe before reading the ring, so nothing published in between
	// is missed; duplicates are skipped by sequence number.
	sub := s.bus.Subscribe(sseBuffer, filter)
	defer sub.Close()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if err := rc.Flush(); err != nil {
		s.log.Warn("event stream cannot flush; closing it", "error", err)
		return
	}

	sent := since
	// catchUp sends the retained events after sent, with a gap first if
	// the ring no longer reaches back that far.
	catchUp := func() error {
		evs, complete := s.bus.Since(sent)
		if !complete && len(evs) > 0 {
			if err := writeSSE(w, "", EventGap, map[string]uint64{"after": sent, "first_seq": evs[0].Seq}); err != nil {
				return err
			}
		}
		for _, e := range evs {
			if e.Seq <= sent || (filter != nil && !filter(e)) {
				continue
			}
			if err := writeEvent(w, e); err != nil {
				return err
			}
			sent = e.Seq
		}
		return rc.Flush()
	}
	if replay {
		if err := catchUp(); err != nil {
			return
		}
	}

	beat := make(chan struct{}, 1)
	arm := func() interface{ Stop() bool } {
		return s.clock.AfterFunc(s.o.Heartbeat, func() {
			select {
			case beat <- struct{}{}:
			default:
			}
		})
	}
	timer := arm()
	defer func() { timer.Stop() }()

	who := record(r).who
	var tokensChanged <-chan struct{} // nil on an open path: never
	if who.set != nil {
		tokensChanged = who.set.changed
	}
	var dropped uint64
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		case <-tokensChanged:
			set := s.tokens.Load()
			if !who.validIn(set) {
				return // its token was revoked or changed
			}
			tokensChanged = set.changed
		case <-beat:
			_, err = io.WriteString(w, ": heartbeat\n\n")
			if err == nil {
				err = rc.Flush()
			}
			timer = arm()
		case e, ok := <-sub.C:
			if !ok {
				return
			}
			if d := sub.Dropped(); d != dropped {
				// The bus dropped events for this stream while it was
				// slow: take them from the ring, in order.
				dropped = d
				err = catchUp()
				break
			}
			if e.Seq <= sent {
				continue
			}
			if err = writeEvent(w, e); err == nil {
				sent = e.Seq
				err = rc.Flush()
			}
		}
		if err != nil {
			return // the client is gone
		}
	}
}

// resumePoint reads where a stream resumes: Last-Event-ID, else ?since.
// replay is false when neither is given (live events only).
func resumePoint(r *http.Request) (seq uint64, replay bool, err error) {
	raw, what := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if raw == "" {
		raw, what = r.URL.Query().Get("since"), "since"
	}
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return 0, false, nil
	}
	seq, err = strconv.ParseUint(raw, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%s must be an event sequence number; got %q", what, raw)
	}
	return seq, true, nil
}

func writeEvent(w io.Writer, e events.Event) error {
	return writeSSE(w, strconv.FormatUint(e.Seq, 10), e.Type, e)
}

// writeSSE writes one event. JSON never holds a raw newline, so data is
// one line.
func writeSSE(w io.Writer, id, typ string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		data, _ = json.Marshal(map[string]string{"error": "encode event: " + err.Error()})
	}
	var b strings.Builder
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	b.WriteString("event: " + oneLine(typ) + "\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
	_, err = io.WriteString(w, b.String())
	return err
}

// oneLine keeps a field value from breaking the stream's framing.
func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
