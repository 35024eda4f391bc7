package natsinbox

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/natsbus/subject"
	"github.com/agent-worker/agent-worker/store"
)

// The purger removes from the log what the agents' stored cursors cover,
// off the turn path: Settled only marks the agent, and one goroutine per
// replica purges, coalescing the settles that came meanwhile. An input is
// purged below its agent's cursor — and, when other agents bind
// subscribe: subjects that can meet it (the same subject, or overlapping
// patterns such as alerts.> and alerts.prod.>), below the lowest of their
// cursors too, so no agent loses a message another has handled. Only
// configured agents' bindings count — this replica's, and while the
// replicas' config files disagree those the others' files have
// (binders.go) — and an agent's cursor counts as at least its binding's
// since: an agent removed from every file pins nothing.
//
// An overlapping input holds nothing back once its agent has settled all
// the router saw on it: an agent that is never sent anything on its
// narrower pattern does not pin a wider one forever.
//
// The cursors of agents owned by other replicas come from the store: an
// agent whose inputs overlap another's writes a copy of its cursors
// (MirrorKey) after each settle. The copy may lag the agent's stored
// cursors — never lead them — so a purge is at worst late.

// MirrorKey is the store key of the copy of agent's cursors that the
// purgers of other replicas read: "logcursors.<agent>".
func MirrorKey(agent string) string { return "logcursors." + agent }

// mirrorFresh is how long a purger uses a copy of another agent's
// cursors it read before reading it again.
const mirrorFresh = 2 * time.Second

type purger struct {
	b    *Binding
	wake chan struct{}

	mu      sync.Mutex
	due     map[*agentLog]bool
	mirrors map[string]mirror
}

type mirror struct {
	cursors inbox.Cursors
	at      time.Time
}

func newPurger(b *Binding) *purger {
	return &purger{b: b, wake: make(chan struct{}, 1), due: map[*agentLog]bool{}, mirrors: map[string]mirror{}}
}

// Settled says the agent's cursors are stored as c (a turn's record, or a
// settle of dead letters): what they cover may be purged from the log.
// It never blocks.
func (b *Binding) Settled(agent string, c inbox.Cursors) {
	a := b.agent(agent)
	if a == nil || b.purger == nil {
		return
	}
	for _, in := range a.inputs {
		raise(&in.cursor, c[in.key])
		b.win.settle(in, in.cursor.Load())
	}
	b.purger.mark(a)
}

// mark has a purged at the purger's next round.
func (p *purger) mark(a *agentLog) {
	p.mu.Lock()
	p.due[a] = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run purges for the agents marked, until Stop.
func (p *purger) run() {
	defer p.b.work.Done()
	for {
		select {
		case <-p.b.stopped:
			return
		case <-p.wake:
		}
		p.mu.Lock()
		due := p.due
		p.due = map[*agentLog]bool{}
		p.mu.Unlock()
		for a := range due {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			p.purgeAgent(ctx, a)
			cancel()
		}
	}
}

// purgeAgent purges each of a's inputs that may hold settled messages.
func (p *purger) purgeAgent(ctx context.Context, a *agentLog) {
	b := p.b
	r := b.roster.Load()
	if r.agents[a.name] != a {
		return // rebound or removed since it was marked: its successor is purged
	}
	// The agent's own floors are taken before the record of the other
	// replicas' bindings is read: a message they cover was handled, so
	// published, after every binding recorded before it (Prepare), and
	// the record read below has that binding.
	owns := make([]uint64, len(a.inputs))
	for i, in := range a.inputs {
		owns[i] = max(in.cursor.Load(), in.since.Load())
	}
	foreign, err := p.foreign(ctx, r, a)
	if err != nil {
		b.opts.Log.Warn("cannot read which subjects other replicas bind; the agent's subscribe: subjects are not purged now", "agent", a.name, "error", err)
		p.again(a, mirrorFresh)
	}
	shared := false
	for _, in := range a.inputs {
		shared = shared || len(r.overlaps[in]) > 0 || len(foreign[in]) > 0
	}
	if shared && b.opts.Store != nil && a.owned.Load() {
		c := inbox.Cursors{}
		for _, in := range a.inputs {
			c[in.key] = in.cursor.Load()
		}
		raw, _ := json.Marshal(c)
		if _, err := b.opts.Store.Put(ctx, MirrorKey(a.name), raw); err != nil {
			b.opts.Log.Warn("cannot store the copy of the agent's cursors other replicas purge by; shared subjects are purged later", "agent", a.name, "error", err)
		}
	}
	for i, in := range a.inputs {
		if !in.dirty.Load() || (err != nil && i >= 2) {
			continue
		}
		own := owns[i]
		floor := own
		for _, f := range foreign[in] {
			floor = min(floor, max(p.mirrorCursor(ctx, f.agent, f.subject), f.since))
		}
		for _, o := range r.overlaps[in] {
			f, lagging := p.floorOf(ctx, o)
			floor = min(floor, f)
			if lagging && f < own {
				// The agent read past what the router has routed (reads
				// from the window or the stream can be ahead of it): look
				// again once it has.
				p.again(a, lagRetry)
			}
		}
		if w := b.opts.DuplicateWindow; w > 0 {
			if s := in.ids.oldest(b.opts.Clock.Now().Add(-w)); s > 0 && s <= floor {
				// Held for its duplicate window: purged when it has passed.
				floor = s - 1
				p.again(a, w)
			}
		}
		if floor == 0 || floor+1 <= in.purged.Load() {
			continue
		}
		if err := b.stream.Purge(ctx, jetstream.WithPurgeSubject(in.key), jetstream.WithPurgeSequence(floor+1)); err != nil {
			b.opts.Log.Warn("cannot purge handled messages from the log; tried again at the agent's next settle", "agent", a.name, "input", in.key, "below", floor+1, "error", err)
			continue
		}
		raise(&in.purged, floor+1)
		if floor == own && floor >= in.seen.Load() && floor >= in.hint.Load() {
			in.dirty.Store(false)
		}
	}
}

// again marks a to be purged after d, once however often it is asked
// before then.
func (p *purger) again(a *agentLog, d time.Duration) {
	if a.purgeArmed.Swap(true) {
		return
	}
	p.b.opts.Clock.AfterFunc(d, func() {
		a.purgeArmed.Store(false)
		p.mark(a)
	})
}

// floorOf returns the sequence below which o holds nothing back: its
// agent's cursor on it or, once that cursor has passed all the router saw
// on o, all the router has routed (lagging: then only the router's
// progress holds it back).
func (p *purger) floorOf(ctx context.Context, o *input) (floor uint64, lagging bool) {
	routed := p.b.routed.Load() // first: see the note below
	seen := max(o.seen.Load(), o.hint.Load())
	c := max(p.cursorOf(ctx, o), o.since.Load())
	// Every message at or below routed reached o's seen before routed
	// moved past it; read in this order, c at or past seen covers them.
	if c >= seen {
		return max(c, routed), true
	}
	return c, false
}

// cursorOf returns o's agent's cursor on o: this replica's own when it
// serves that agent, else the copy in the store (0 when there is none).
func (p *purger) cursorOf(ctx context.Context, o *input) uint64 {
	if o.agent.owned.Load() {
		return o.cursor.Load()
	}
	return p.mirrorCursor(ctx, o.agent.name, o.key)
}

// mirrorCursor returns agent's cursor on key as its copy in the store has
// it (0 when there is none, or it cannot be read).
func (p *purger) mirrorCursor(ctx context.Context, agent, key string) uint64 {
	b := p.b
	if b.opts.Store == nil {
		return 0
	}
	now := b.opts.Clock.Now()
	p.mu.Lock()
	m, ok := p.mirrors[agent]
	p.mu.Unlock()
	if !ok || now.Sub(m.at) > mirrorFresh {
		var c inbox.Cursors
		if _, err := store.GetJSON(ctx, b.opts.Store, MirrorKey(agent), &c); err != nil && !errors.Is(err, store.ErrNotFound) {
			b.opts.Log.Warn("cannot read another agent's cursors; a subject it shares is not purged now", "agent", agent, "error", err)
			return 0
		}
		m = mirror{cursors: c, at: now}
		p.mu.Lock()
		p.mirrors[agent] = m
		p.mu.Unlock()
	}
	return m.cursors[key]
}

// foreign returns, for each of a's subscribe: inputs, the bindings other
// replicas' files have of subjects that can meet it and r lacks: while
// the replicas' files disagree the input is purged only below those
// agents' cursors (or their since) too (binders.go).
func (p *purger) foreign(ctx context.Context, r *roster, a *agentLog) (map[*input][]foreignBinder, error) {
	b := p.b
	if b.binders == nil || len(a.inputs) <= 2 {
		return nil, nil
	}
	local := func(subj, agent string) bool {
		o := r.agents[agent]
		return o != nil && o.byKey[subj] != nil
	}
	all, err := b.binders.others(ctx, local)
	if err != nil || len(all) == 0 {
		return nil, err
	}
	out := map[*input][]foreignBinder{}
	for _, in := range a.inputs[2:] {
		for _, f := range all {
			if f.agent != a.name && subject.Overlap(in.key, f.subject) {
				out[in] = append(out[in], f)
			}
		}
	}
	return out, nil
}
