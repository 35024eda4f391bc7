package events

import (
	"context"
	"sync"
)

// Follow says where a Tail starts and which events it delivers.
type Follow struct {
	// Replay delivers the retained events with an id above After first,
	// then live ones. Without it the tail delivers only events published
	// after Follow returned, and After is ignored.
	Replay bool
	After  uint64
	// Agent, when set, limits the tail to that agent's events.
	Agent string
	// Filter, when set, limits the tail further. On a Bus it runs under
	// the bus's lock, so it must be quick and must not publish.
	Filter func(Event) bool
}

// Keep reports whether a tail following f delivers e: its Agent and
// Filter both let it through.
func (f Follow) Keep(e Event) bool {
	return (f.Agent == "" || e.Agent == f.Agent) && (f.Filter == nil || f.Filter(e))
}

// Item is one thing a Tail delivers: an event, or (Gap set, Event zero) a
// notice that events were lost before the ones that follow.
type Item struct {
	Event Event
	Gap   *Gap
}

// Gap says that the events with ids above After are no longer all
// retained: the next event delivered has id FirstSeq or above. A FirstSeq
// at or below After means the history was reset — a Bus of a restarted
// process, a deleted and recreated stream — and ids started over. A gap
// is stream-wide: it may cover no event the tail's filter would have
// delivered.
type Gap struct {
	After    uint64 `json:"after"`
	FirstSeq uint64 `json:"first_seq"`
}

// Tail is a followed history of events, in id order.
type Tail interface {
	// Items delivers the tail's events and gaps. It is closed when the
	// tail ends: Close was called, the context given to Follow is done,
	// or the feed failed (Err says why).
	Items() <-chan Item
	// Err is why the tail ended by itself; nil while it runs and after
	// Close or the end of its context.
	Err() error
	// Close ends the tail and waits until it has let go of the feed. It
	// may be called more than once.
	Close()
}

// followBuffer is how many live events a tail of a Bus may fall behind
// before the bus drops some for it; it then takes them from the ring, or
// delivers a gap.
const followBuffer = 256

// Follow returns a tail of the bus: with f.Replay, the ring's events
// after f.After (preceded by a Gap when the ring no longer reaches back
// that far, or when f.After is beyond the newest event: the bus is of a
// newer process than the id), then live events. A tail that falls behind
// never slows Publish: the events the bus drops for it are taken from the
// ring, or reported as a Gap once the ring lost them. It never fails.
func (b *Bus) Follow(ctx context.Context, f Follow) (Tail, error) {
	b.mu.Lock()
	sent := b.seq // live only: after the newest event so far
	var gap *Gap
	if f.Replay {
		sent = f.After
		if f.After > b.seq {
			first := b.seq + 1
			if len(b.ring) > 0 {
				first = b.ring[b.head%len(b.ring)].Seq
			}
			gap = &Gap{After: f.After, FirstSeq: first}
			sent = first - 1
		}
	}
	// Subscribed under the same lock as sent was read: nothing published
	// in between is missed.
	c := make(chan Event, followBuffer)
	sub := &Subscription{C: c, c: c, bus: b, filter: f.Keep}
	b.subs[sub] = struct{}{}
	b.mu.Unlock()

	t := &busTail{items: make(chan Item, 64), done: make(chan struct{}), ended: make(chan struct{})}
	go t.run(ctx, b, sub, f, sent, gap)
	return t, nil
}

// busTail is a Tail of a Bus.
type busTail struct {
	items chan Item
	done  chan struct{} // closed by Close
	once  sync.Once
	ended chan struct{} // closed when run returned
}

func (t *busTail) Items() <-chan Item { return t.items }
func (t *busTail) Err() error         { return nil }

func (t *busTail) Close() {
	t.once.Do(func() { close(t.done) })
	<-t.ended
}

func (t *busTail) run(ctx context.Context, b *Bus, sub *Subscription, f Follow, sent uint64, gap *Gap) {
	defer close(t.ended)
	defer close(t.items)
	defer sub.Close()
	send := func(it Item) bool {
		select {
		case t.items <- it:
			return true
		case <-ctx.Done():
		case <-t.done:
		}
		return false
	}
	// catchUp delivers the retained events after sent, with a gap first
	// if the ring no longer reaches back that far.
	catchUp := func() bool {
		evs, complete := b.Since(sent)
		if !complete && len(evs) > 0 {
			if !send(Item{Gap: &Gap{After: sent, FirstSeq: evs[0].Seq}}) {
				return false
			}
		}
		for _, e := range evs {
			if e.Seq <= sent {
				continue
			}
			if f.Keep(e) && !send(Item{Event: e}) {
				return false
			}
			sent = e.Seq
		}
		return true
	}
	if gap != nil && !send(Item{Gap: gap}) {
		return
	}
	if f.Replay && !catchUp() {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.done:
			return
		case e, ok := <-sub.C:
			if !ok {
				return
			}
			// The bus dropped events for this tail while it was slow,
			// from lost on. Those buffered before them come first; then,
			// at the first event past them (or when nothing more is
			// buffered), the ring has the rest, in order.
			lost := sub.lossFrom()
			if lost == 0 || (e.Seq < lost && len(sub.C) > 0) {
				if e.Seq > sent {
					if !send(Item{Event: e}) {
						return
					}
					sent = e.Seq
				}
				continue
			}
			sub.clearLoss() // before reading the ring, which then holds every event dropped so far
			if e.Seq < lost && e.Seq > sent {
				if !send(Item{Event: e}) {
					return
				}
				sent = e.Seq
			}
			if !catchUp() {
				return
			}
		}
	}
}
