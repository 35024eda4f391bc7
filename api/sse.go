package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/events"
)

// EventFeed is the history of events the event streams read and follow:
// an events.Bus (its ring of this process's newest events), or the
// durable events stream (package eventstream: every replica's events,
// with ids that survive restarts).
type EventFeed interface {
	// Follow starts a tail; an error means the history cannot be read
	// now (answered 503).
	Follow(ctx context.Context, f events.Follow) (events.Tail, error)
}

// EventGap is the type of the stream event that says events were lost:
// the feed no longer held everything after the requested id. Its data is
// events.Gap, {"after": <requested id>, "first_seq": <id of the oldest
// event still held>}; a first_seq at or below after means the history
// was reset (a restarted worker in core-NATS mode, a recreated events
// stream) and ids started over. A gap frame has no id.
const EventGap = "gap"

// feed is what the event streams read: EventFeed, else the bus's ring.
func (s *Server) feed() EventFeed {
	if s.o.EventFeed != nil {
		return s.o.EventFeed
	}
	return s.bus
}

func (s *Server) agentEvents(w http.ResponseWriter, r *http.Request) {
	a, ok := s.agent(w, r)
	if !ok {
		return
	}
	s.stream(w, r, events.Follow{Agent: a.Name()})
}

// allEvents streams the events of every agent the caller may see: with a
// token scoped to some agents, only theirs.
func (s *Server) allEvents(w http.ResponseWriter, r *http.Request) {
	var f events.Follow
	if who := record(r).who; len(who.Agents) > 0 {
		f.Filter = func(e events.Event) bool { return who.MayAccess(e.Agent) }
	}
	s.stream(w, r, f)
}

// stream serves Server-Sent Events from the feed: each event as "id:
// <id>", "event: <type>", "data: <events.Event as JSON>". With a
// Last-Event-ID header (or else ?since=<id>) it first replays the events
// the feed still holds after that id, preceded by a "gap" event if it
// lost some; then live events, and a ": heartbeat" comment every
// Heartbeat. Without either only live events. Ids are the feed's: with
// the durable events stream they are the same on every replica and
// survive restarts, so a client may resume on another replica. A feed
// that cannot be read answers 503; one that fails later ends the stream
// (the client resumes with Last-Event-ID). The stream ends when the
// client goes, at Shutdown, or when SetTokens takes away the token it was
// opened with.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, f events.Follow) {
	since, replay, err := resumePoint(r)
	if err != nil {
		fail(w, r, http.StatusBadRequest, "%v", err)
		return
	}
	h := w.Header()
	if r.Method == http.MethodHead {
		setStreamHeaders(h)
		w.WriteHeader(http.StatusOK)
		return
	}
	f.Replay, f.After = replay, since
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	tail, err := s.feed().Follow(ctx, f)
	if err != nil {
		s.log.Warn("event stream refused: the event history cannot be read", "error", err)
		fail(w, r, http.StatusServiceUnavailable, "event history unavailable: %v", err)
		return
	}
	defer tail.Close()

	rc := http.NewResponseController(w)
	setStreamHeaders(h)
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		s.log.Warn("event stream cannot flush; closing it", "error", err)
		return
	}
	s.pump(ctx, w, rc, tail, record(r).who)
}

// setStreamHeaders marks an answer as an event stream that no cache may
// keep; a HEAD request gets the same headers as the stream itself.
func setStreamHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
}

// pump writes the tail's items and the heartbeats to an open stream until
// it ends: the client goes (ctx, or a failed write), the server shuts
// down, the tail ends, or the tokens change so that who's token is no
// longer valid. who.Set is nil on an open path, whose stream no token
// change ends.
func (s *Server) pump(ctx context.Context, w io.Writer, rc *http.ResponseController, tail events.Tail, who caller) {
	hb := s.startHeartbeat()
	defer hb.stop()

	var tokensChanged <-chan struct{} // nil on an open path: never
	if set := who.Set(); set != nil {
		tokensChanged = set.Changed()
	}
	items := tail.Items()
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		case <-tokensChanged:
			set := s.tokens.Load()
			if !who.ValidIn(set) {
				return // its token was revoked or changed
			}
			tokensChanged = set.Changed()
		case <-hb.c:
			_, err = io.WriteString(w, ": heartbeat\n\n")
			if err == nil {
				err = rc.Flush()
			}
			hb.rearm()
		case it, ok := <-items:
			if !ok {
				if err := tail.Err(); err != nil {
					s.log.Warn("event stream ended: its feed failed; the client may resume with Last-Event-ID", "error", err)
				}
				return
			}
			err = writeItem(w, it)
			if err == nil && len(items) == 0 {
				err = rc.Flush() // once per burst: a replay is flushed at its end
			}
		}
		if err != nil {
			return // the client is gone
		}
	}
}

// writeItem writes one item of a tail: an event, or the gap frame that
// says events were lost before it.
func writeItem(w io.Writer, it events.Item) error {
	if it.Gap != nil {
		return writeSSE(w, "", EventGap, it.Gap)
	}
	return writeEvent(w, it.Event)
}

// heartbeat ticks on c every Heartbeat of a stream, through the server's
// clock so tests can drive it. It is re-armed only once a tick was taken,
// so a stream that cannot keep up never has more than one tick waiting.
type heartbeat struct {
	c     chan struct{}
	timer clock.Timer
	arm   func() clock.Timer
}

// startHeartbeat arms the first tick.
func (s *Server) startHeartbeat() *heartbeat {
	hb := &heartbeat{c: make(chan struct{}, 1)}
	hb.arm = func() clock.Timer {
		return s.clock.AfterFunc(s.o.Heartbeat, func() {
			select {
			case hb.c <- struct{}{}:
			default:
			}
		})
	}
	hb.timer = hb.arm()
	return hb
}

// rearm schedules the next tick after one was taken.
func (hb *heartbeat) rearm() { hb.timer = hb.arm() }

// stop cancels the pending tick.
func (hb *heartbeat) stop() { hb.timer.Stop() }

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
