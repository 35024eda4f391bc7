package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/money"
	"github.com/agent-worker/agent-worker/store"
)

// Guardrail names (the guardrail label of guardrail_trips_total, and what
// Reset takes).
const (
	Turn        = "turn_usd"
	Session     = "session_usd"
	Daily       = "daily_usd"
	WorkerDaily = "worker_daily_usd"
	Watchdog    = "watchdog"
)

// Event types.
const (
	EventTripped = "guardrail-tripped"
	EventReset   = "guardrail-reset"
	EventCapped  = "turn-capped"
	// EventCharged is published after every priced model response:
	// model, tokens, cost_usd, priced. model is the model that answered:
	// the agent's, or the fallback named by the response (ServedByKey).
	EventCharged = "model-usage"
	// EventModelError: a model call failed. Data: model (the agent's, or
	// the one an operator switched it to, as the error names it:
	// models.ServedError), error.
	EventModelError = "model-error"
	// EventToolCall: a tool call finished. Data: tool, outcome (ok|error).
	EventToolCall = "tool-call"
)

// ServedByKey is the LLMResponse.CustomMetadata key naming the model that
// answered when it is not the agent's own (a fallback; models.ServedByKey):
// the response is priced at that model's price and charged under its name.
const ServedByKey = "served_by"

// Limits are one agent's ceilings (USD, 0 = none) and caps (0 = none).
type Limits struct {
	TurnUSD, SessionUSD, DailyUSD float64
	ModelCallsPerTurn             int
	ToolCallsPerTurn              int
	TokensPerTurn                 int
}

// Options configure a Guard.
type Options struct {
	Store  store.Store // required
	Clock  clock.Clock
	Log    *slog.Logger
	Events *events.Bus
	Prices Prices
	// Location's calendar day bounds the daily ceilings. Default UTC.
	Location *time.Location
	// WorkerDailyUSD is the ceiling across all agents per day; 0 = none.
	WorkerDailyUSD float64
	// Owner fences the guard's writes: an agent's ledger is stored (and
	// Reset changes it) only while Owner says this replica owns the
	// agent. Nil: this process owns every agent (one replica).
	Owner Owner
}

// Owner says whether this replica owns an agent (holds its lease), so it
// alone may write the agent's durable state. The worker's is backed by
// lease.Manager.Held.
type Owner interface {
	Owns(agent string) bool
}

// Errors Reset (and the writes behind it) return instead of writing a
// ledger that is not the agent's truth.
var (
	// ErrNotOwner: another replica owns the agent; its ledger here is not
	// the durable one and is never written.
	ErrNotOwner = errors.New("not the owner: another replica owns this agent's guardrail state")
	// ErrNotLoaded: this replica owns the agent but has not loaded its
	// stored ledger yet (Restore); writing now would overwrite the stored
	// spend with an empty ledger.
	ErrNotLoaded = errors.New("the agent's stored guardrail state is not loaded yet; retry")
)

// Trip is a crossed guardrail.
type Trip struct {
	Guardrail string    `json:"guardrail"`
	Reason    string    `json:"reason"`
	At        time.Time `json:"at"`
	Spent     float64   `json:"spent_usd,omitempty"`
	Ceiling   float64   `json:"ceiling_usd,omitempty"`
}

// state is what an agent keeps in the store under guard.<agent>.
type state struct {
	SessionSpent float64 `json:"session_spent_usd"`
	SessionAdded float64 `json:"session_added_usd"`
	Day          string  `json:"day"`
	DaySpent     float64 `json:"day_spent_usd"`
	DayAdded     float64 `json:"day_added_usd"`
	Trip         *Trip   `json:"trip,omitempty"`
}

// workerState is the worker-wide daily ledger, under guard._worker.
type workerState struct {
	Day   string  `json:"day"`
	Spent float64 `json:"spent_usd"`
	Added float64 `json:"added_usd"`
	Trip  *Trip   `json:"trip,omitempty"`
}

type ledger struct {
	// Set by AddAgent, never changed after.
	name   string
	model  string
	price  Price
	priced bool
	limits Limits

	// mu guards everything below. It is the agent's own lock: charging
	// one agent never waits for another, except for the few instructions
	// under Guard.wmu that update the worker-wide ledger.
	mu       sync.Mutex
	st       state
	restored bool

	inTurn     bool
	turnSpent  float64
	modelCalls int
	toolCalls  int
	tokens     int
	tokensIn   int
	tokensOut  int
	responses  int   // completed model responses charged this turn
	stopped    error // the cap that stopped this turn

	// after holds calls into agents (halt, note, reopen) decided under mu
	// and made once it is released: the driver calls the guard while
	// holding an agent's lock, so the guard must never call an agent
	// while holding its own.
	after []call

	// Durable writes (see flush). ver counts changes of st; saved is the
	// newest ver stored. wneed is the worker-ledger version this agent's
	// changes need stored. At most one write of the agent's ledger is in
	// flight (writing); done is closed when it ends.
	ver, saved uint64
	wneed      uint64
	writing    bool
	done       chan struct{}
	failing    bool          // the last write failed; retried until it succeeds
	retrying   bool          // a retry is scheduled
	backoff    time.Duration // the next retry's delay
}

// call is a call into an agent decided under a ledger's lock. Halts and
// reopenings carry a ticket, drawn under wmu where they are decided, and
// run in ticket order across all agents (see release): a reset's
// reopening never overtakes the halt of the trip it lifted, whichever
// agent tripped the worker-wide ceiling. Ticket 0: no order (a note).
type call struct {
	ticket uint64
	f      func()
}

// Guard holds every agent's ledger. It implements driver.Guard.
//
// Locks, always taken in this order and never two ledgers' at once: a
// ledger's mu, then wmu (the worker-wide ledger), then mu (the agents map
// and their controls, a leaf). No lock is held across a store call.
type Guard struct {
	o Options
	// priced is the pricing table in force (o.Prices at start; a config
	// reload replaces it: reprice.go).
	priced atomic.Pointer[Prices]
	mu     sync.RWMutex
	agents map[string]*ledger
	ctls   map[string]driver.Control

	wmu      sync.Mutex
	worker   workerState
	wload    bool // worker state loaded
	wver     uint64
	wsaved   uint64
	wwriting bool
	wdone    chan struct{}

	dmu sync.Mutex
	day clock.Timer

	// The line of ordered calls: tickets drawn under wmu, served under
	// cmu.
	tickets uint64
	cmu     sync.Mutex
	served  uint64
	ccond   *sync.Cond

	closed   atomic.Bool
	failures atomic.Uint64
}

// unlock releases l.mu and makes the calls decided under it, in order.
func (g *Guard) unlock(l *ledger) { g.release(l)() }

// release releases l.mu and returns the function that makes the calls
// decided under it, each with a ticket after those with earlier tickets.
// The caller must call it (once), holding no lock of the guard's.
func (g *Guard) release(l *ledger) func() {
	calls := l.after
	l.after = nil
	l.mu.Unlock()
	if len(calls) == 0 {
		return func() {}
	}
	return func() {
		for _, c := range calls {
			if c.ticket == 0 {
				c.f()
				continue
			}
			g.cmu.Lock()
			for g.served+1 != c.ticket {
				g.ccond.Wait()
			}
			g.cmu.Unlock()
			c.f()
			g.cmu.Lock()
			g.served = c.ticket
			g.ccond.Broadcast()
			g.cmu.Unlock()
		}
	}
}

// orderedLocked adds f to l's calls with the next ticket. Callers hold
// l.mu and wmu.
func (g *Guard) orderedLocked(l *ledger, f func()) {
	g.tickets++
	l.after = append(l.after, call{ticket: g.tickets, f: f})
}

var _ driver.Guard = (*Guard)(nil)

// New returns a Guard; AddAgent each agent before the driver attaches.
func New(o Options) *Guard {
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Location == nil {
		o.Location = time.UTC
	}
	if o.Prices.table == nil {
		o.Prices = NewPrices(nil)
	}
	g := &Guard{o: o, agents: map[string]*ledger{}, ctls: map[string]driver.Control{}}
	g.priced.Store(&o.Prices)
	g.ccond = sync.NewCond(&g.cmu)
	return g
}

// AddAgent registers an agent, its model's name (for pricing) and its
// limits. An unpriced model is logged as a warning here.
func (g *Guard) AddAgent(agent, model string, l Limits) {
	price, ok := g.prices().Lookup(model)
	if !ok {
		g.o.Log.Warn("model has no price: it costs $0 here and no cost ceiling binds it; token and turn caps still apply", "agent", agent, "model", model)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.agents[agent] = &ledger{name: agent, model: model, price: price, priced: ok, limits: l}
}

// ledger returns the agent's ledger, or nil.
func (g *Guard) ledger(agent string) *ledger {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.agents[agent]
}

// ledgers returns every ledger.
func (g *Guard) ledgers() []*ledger {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make([]*ledger, 0, len(g.agents))
	for _, l := range g.agents {
		out = append(out, l)
	}
	return out
}

func (g *Guard) ctl(agent string) driver.Control {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.ctls[agent]
}

// AddFallbacks warns, as AddAgent does for the agent's model, about each
// of the agent's fallback models that has no price: a response it serves
// costs $0 and no cost ceiling binds it. Their responses are priced by
// their own names (see ServedByKey) whether or not they were added here.
func (g *Guard) AddFallbacks(agent string, models ...string) {
	for _, m := range models {
		if _, ok := g.prices().Lookup(m); !ok {
			g.o.Log.Warn("fallback model has no price: its responses cost $0 here and no cost ceiling binds them; token and turn caps still apply", "agent", agent, "model", m)
		}
	}
}

// PricedModel reports whether model has a price.
func (g *Guard) PricedModel(model string) bool {
	_, ok := g.prices().Lookup(model)
	return ok
}

// Priced reports whether the agent's model has a price.
func (g *Guard) Priced(agent string) bool {
	l := g.ledger(agent)
	return l != nil && l.priced
}

// Attach implements driver.Guard.
func (g *Guard) Attach(agent string, ctl driver.Control) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.agents[agent] != nil {
		g.ctls[agent] = ctl
	}
}

func agentKey(agent string) string { return "guard." + agent }

const workerKey = "guard._worker"

func (g *Guard) today() string { return g.o.Clock.Now().In(g.o.Location).Format(time.DateOnly) }

// Restore implements driver.Guard: it loads the agent's spend and trip
// (and, once, the worker's) and re-halts a tripped agent. What this
// replica held of the agent and had not stored is dropped: the store is
// the truth for a replica that (re)gains the agent.
func (g *Guard) Restore(ctx context.Context, agent string) error {
	l := g.ledger(agent)
	if l == nil {
		return nil
	}
	l.mu.Lock()
	// No write of the old ledger lands after the load: none starts from
	// here (not loaded), and one in flight is waited for.
	l.restored = false
	for l.writing {
		ch := l.done
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("restore guardrails of %s: %w", agent, ctx.Err())
		}
		l.mu.Lock()
	}
	l.mu.Unlock()
	g.wmu.Lock()
	needWorker := !g.wload
	g.wmu.Unlock()
	var st state
	if _, err := store.GetJSON(ctx, g.o.Store, agentKey(agent), &st); err != nil {
		return fmt.Errorf("restore guardrails of %s: %w", agent, err)
	}
	var ws workerState
	if needWorker {
		if _, err := store.GetJSON(ctx, g.o.Store, workerKey, &ws); err != nil {
			return fmt.Errorf("restore worker-wide guardrail: %w", err)
		}
	}
	l.mu.Lock()
	g.wmu.Lock()
	if needWorker && !g.wload {
		g.worker, g.wload = ws, true
	}
	g.wmu.Unlock()
	l.st, l.restored = st, true
	l.saved, l.failing = l.ver, false
	if changed, _ := g.rollDay(l); changed {
		g.markLocked(l)
	}
	trip := l.st.Trip
	g.wmu.Lock()
	if trip == nil && g.worker.Trip != nil {
		trip = g.worker.Trip
	}
	g.wmu.Unlock()
	l.mu.Unlock()
	if ctl := g.ctl(agent); trip != nil && ctl != nil {
		g.o.Log.Warn("agent restored halted by a guardrail", "agent", agent, "guardrail", trip.Guardrail, "reason", trip.Reason)
		ctl.Halt(trip.Reason)
		g.armDayBoundary()
	}
	return nil
}

// writable reports why the agent's ledger must not be written now (nil:
// it may be): this replica does not own the agent, or owns it but has not
// loaded its stored ledger. A ledger found not owned is marked not loaded,
// so it is written again only after Restore re-reads the store. Callers
// hold l.mu.
func (g *Guard) writable(l *ledger) error {
	if g.o.Owner != nil && !g.o.Owner.Owns(l.name) {
		l.restored = false
		return fmt.Errorf("agent %q: %w", l.name, ErrNotOwner)
	}
	if !l.restored {
		return fmt.Errorf("agent %q: %w", l.name, ErrNotLoaded)
	}
	return nil
}

// rollDay starts a new day's ledger when the calendar day changed; a
// daily trip of the old day is lifted. Callers hold l.mu (l may be nil)
// and not wmu. It reports whether the agent's or the worker's ledger
// changed, and whether a daily trip was lifted. A changed worker ledger
// is marked to be stored with l's next write.
func (g *Guard) rollDay(l *ledger) (changed, lifted bool) {
	today := g.today()
	g.wmu.Lock()
	if g.worker.Day != today {
		if g.worker.Trip != nil {
			lifted = true
		}
		g.worker = workerState{Day: today, Added: 0}
		g.wver++
		changed = true
		if l != nil {
			l.wneed = g.wver
		}
	}
	g.wmu.Unlock()
	if l != nil && l.st.Day != today {
		l.st.Day, l.st.DaySpent, l.st.DayAdded = today, 0, 0
		changed = true
		if l.st.Trip != nil && l.st.Trip.Guardrail == Daily {
			l.st.Trip = nil
			lifted = true
		}
	}
	return changed, lifted
}

// markLocked records that the agent's ledger changed and must be stored.
// Callers hold l.mu.
func (g *Guard) markLocked(l *ledger) { l.ver++ }

// markWorkerLocked records that the worker-wide ledger changed through
// l and must be stored with l's next write. Callers hold l.mu and wmu.
func (g *Guard) markWorkerLocked(l *ledger) {
	g.wver++
	l.wneed = g.wver
}

// writeTimeout bounds one store write of a ledger.
const writeTimeout = 10 * time.Second

// ErrTripped is wrapped by Admit's error for a tripped agent.
var ErrTripped = errors.New("guardrail tripped")

// Admit implements driver.Guard: a tripped agent, or one already at a
// ceiling, gets no turn. It decides on the ledger in memory, which is
// always current; it writes (synchronously) only when it changes a trip.
func (g *Guard) Admit(_ context.Context, agent string) error {
	l := g.ledger(agent)
	if l == nil {
		return nil
	}
	l.mu.Lock()
	changed, lifted := g.rollDay(l)
	if changed {
		g.markLocked(l)
	}
	tripped, err := g.admitLocked(l)
	// The driver holds the agent's lock while it admits, and a halt
	// takes it: the calls (a halt, here) wait for Admit to return.
	hasCalls := len(l.after) > 0
	if run := g.release(l); hasCalls {
		go run()
	}
	if lifted || tripped {
		g.flushNow(l)
	}
	return err
}

// admitLocked: callers hold l.mu. tripped: a ceiling tripped here.
func (g *Guard) admitLocked(l *ledger) (tripped bool, err error) {
	if t := l.st.Trip; t != nil {
		return false, fmt.Errorf("%w: %s", ErrTripped, t.Reason)
	}
	g.wmu.Lock()
	defer g.wmu.Unlock()
	if t := g.worker.Trip; t != nil {
		return false, fmt.Errorf("%w: %s", ErrTripped, t.Reason)
	}
	if trip := g.crossed(l, false); trip != nil {
		g.tripLocked(l, trip)
		return true, fmt.Errorf("%w: %s", ErrTripped, trip.Reason)
	}
	return false, nil
}

// ceilings returns the effective session and daily ceilings (configured
// plus added budget; 0 = none).
func (l *ledger) ceilings() (session, daily float64) {
	if l.limits.SessionUSD > 0 {
		session = l.limits.SessionUSD + l.st.SessionAdded
	}
	if l.limits.DailyUSD > 0 {
		daily = l.limits.DailyUSD + l.st.DayAdded
	}
	return session, daily
}

// workerCeiling: callers hold wmu.
func (g *Guard) workerCeiling() float64 {
	if g.o.WorkerDailyUSD <= 0 {
		return 0
	}
	return g.o.WorkerDailyUSD + g.worker.Added
}

// crossed returns the first ceiling the agent has reached, if any; the
// turn ceiling only inside a turn. Callers hold l.mu and wmu.
func (g *Guard) crossed(l *ledger, inTurn bool) *Trip {
	session, daily := l.ceilings()
	switch {
	case inTurn && l.limits.TurnUSD > 0 && l.turnSpent >= l.limits.TurnUSD:
		return &Trip{Guardrail: Turn, At: g.o.Clock.Now(), Spent: l.turnSpent, Ceiling: l.limits.TurnUSD,
			Reason: fmt.Sprintf("turn cost %s reached the per-turn ceiling of %s", money.USD(l.turnSpent), money.USD(l.limits.TurnUSD))}
	case session > 0 && l.st.SessionSpent >= session:
		return &Trip{Guardrail: Session, At: g.o.Clock.Now(), Spent: l.st.SessionSpent, Ceiling: session,
			Reason: fmt.Sprintf("session spend %s reached the session ceiling of %s", money.USD(l.st.SessionSpent), money.USD(session))}
	case daily > 0 && l.st.DaySpent >= daily:
		return &Trip{Guardrail: Daily, At: g.o.Clock.Now(), Spent: l.st.DaySpent, Ceiling: daily,
			Reason: fmt.Sprintf("spend today (%s) %s reached the daily ceiling of %s", l.st.Day, money.USD(l.st.DaySpent), money.USD(daily))}
	case g.workerCeiling() > 0 && g.worker.Spent >= g.workerCeiling():
		return &Trip{Guardrail: WorkerDaily, At: g.o.Clock.Now(), Spent: g.worker.Spent, Ceiling: g.workerCeiling(),
			Reason: fmt.Sprintf("worker-wide spend today (%s) %s reached the worker daily ceiling of %s", g.worker.Day, money.USD(g.worker.Spent), money.USD(g.workerCeiling()))}
	}
	return nil
}

// tripLocked records a trip, halts the agent (every agent for the
// worker-wide ceiling) and announces it. Callers hold l.mu and wmu, so
// the worker-wide ceiling trips once however many agents cross it
// together; the halts run after l.mu is released, and the caller stores
// the trip (flushNow) before it lets the turn go on.
func (g *Guard) tripLocked(l *ledger, t *Trip) {
	var halt []string
	if t.Guardrail == WorkerDaily {
		g.worker.Trip = t
		g.markWorkerLocked(l)
		g.mu.RLock()
		for name := range g.agents {
			halt = append(halt, name)
		}
		g.mu.RUnlock()
	} else {
		l.st.Trip = t
		halt = []string{l.name}
	}
	g.markLocked(l)
	g.o.Log.Warn("guardrail tripped: agent halted", "agent", l.name, "guardrail", t.Guardrail, "spent_usd", t.Spent, "ceiling_usd", t.Ceiling, "reason", t.Reason)
	for _, x := range halt {
		g.emit(x, EventTripped, map[string]any{"guardrail": t.Guardrail, "reason": t.Reason, "spent_usd": t.Spent, "ceiling_usd": t.Ceiling})
	}
	for _, x := range halt {
		if ctl := g.ctl(x); ctl != nil {
			g.orderedLocked(l, func() { ctl.Halt(t.Reason) })
		}
	}
	if t.Guardrail == Daily || t.Guardrail == WorkerDaily {
		l.after = append(l.after, call{f: g.armDayBoundary})
	}
}

// Trip records a trip raised elsewhere (the watchdog) so it is stored and
// survives a restart, and halts the agent. The trip is stored when Trip
// returns (or, the store failing, retried until it is).
func (g *Guard) Trip(agent, guardrail, reason string) {
	l := g.ledger(agent)
	if l == nil {
		return
	}
	l.mu.Lock()
	g.wmu.Lock()
	g.tripLocked(l, &Trip{Guardrail: guardrail, Reason: reason, At: g.o.Clock.Now()})
	g.wmu.Unlock()
	calls := g.release(l)
	g.flushNow(l)
	calls()
}

func (g *Guard) emit(agent, typ string, data map[string]any) {
	if g.o.Events != nil {
		g.o.Events.Publish(events.Event{Time: g.o.Clock.Now(), Agent: agent, Type: typ, Data: data})
	}
}

// armDayBoundary wakes the guard at the next midnight in its time zone to
// lift daily trips.
func (g *Guard) armDayBoundary() {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	if g.day != nil {
		return
	}
	now := g.o.Clock.Now().In(g.o.Location)
	y, m, d := now.Date()
	midnight := time.Date(y, m, d+1, 0, 0, 0, 0, g.o.Location)
	g.day = g.o.Clock.AfterFunc(midnight.Sub(now), g.newDay)
}

// newDay lifts daily trips, stores the new day's ledgers of the agents
// this replica owns, and reopens the agents the trips halted.
func (g *Guard) newDay() {
	g.dmu.Lock()
	g.day = nil
	g.dmu.Unlock()
	g.wmu.Lock()
	workerTripped := g.worker.Trip != nil
	g.wmu.Unlock()
	var reopen, owned []*ledger
	for _, l := range g.ledgers() {
		l.mu.Lock()
		wasDaily := l.st.Trip != nil && l.st.Trip.Guardrail == Daily
		changed, _ := g.rollDay(l)
		if (wasDaily || workerTripped) && l.st.Trip == nil {
			reopen = append(reopen, l)
		}
		if g.o.Owner == nil || g.o.Owner.Owns(l.name) {
			// Another replica's agent is its owner's to roll.
			if changed {
				g.markLocked(l)
			}
			owned = append(owned, l)
		}
		l.mu.Unlock()
	}
	for _, l := range owned {
		g.flushNow(l)
	}
	for _, l := range reopen {
		g.o.Log.Info("new day: daily guardrail lifted", "agent", l.name)
		g.emit(l.name, EventReset, map[string]any{"guardrail": Daily, "reason": "new day"})
		if ctl := g.ctl(l.name); ctl != nil {
			ctl.ClearHalt()
		}
	}
}

// Charge adds usd to the agent's spend from outside a model call (a
// subagent's spend counts against its parent) and trips a crossed
// ceiling. The charge is stored when Charge returns (or, the store
// failing, retried until it is): a caller may ack the charge's record.
func (g *Guard) Charge(agent string, usd float64) {
	l := g.ledger(agent)
	if l == nil {
		return
	}
	l.mu.Lock()
	g.chargeLocked(l, usd, l.inTurn)
	calls := g.release(l)
	g.flushNow(l)
	calls()
}

// chargeLocked adds usd to the agent's and the worker's spend — and to
// the running turn's when inTurn (the charge is the turn's: a model call
// of it, a subagent's spend while it runs) — and trips the first ceiling
// crossed, the turn's only when inTurn (unless a trip already holds the
// agent). Callers hold l.mu. It returns the trip.
func (g *Guard) chargeLocked(l *ledger, usd float64, inTurn bool) *Trip {
	if changed, _ := g.rollDay(l); changed {
		g.markLocked(l)
	}
	if usd == 0 {
		// Nothing spent (an unpriced model): nothing to store, no store
		// round trip at the end of the turn.
		return nil
	}
	l.st.SessionSpent += usd
	l.st.DaySpent += usd
	if inTurn && l.inTurn {
		l.turnSpent += usd
	}
	g.markLocked(l)
	g.wmu.Lock()
	defer g.wmu.Unlock()
	g.worker.Spent += usd
	g.markWorkerLocked(l)
	if t := g.crossed(l, inTurn); t != nil && l.st.Trip == nil && g.worker.Trip == nil {
		g.tripLocked(l, t)
		return t
	}
	return nil
}

// flushNow stores the agent's ledger as it is now (and the worker-wide
// one), waiting for it: a trip, a reset or a charge made outside a turn
// is durable when its call returns. A failed write is logged and retried
// in the background.
func (g *Guard) flushNow(l *ledger) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	_ = g.flush(ctx, l)
}

// flush writes the agent's ledger until the store holds at least the
// version it had when flush was called, then the worker-wide ledger up to
// the version the agent's changes need. Writes are coalesced: each
// writes the latest state, at most one is in flight per ledger, and a
// caller finding one in flight waits for it and writes again only if the
// state changed since it started. Nothing is written, and the change is
// dropped, when the ledger is not writable here (see writable): only the
// owner, once it has loaded the stored ledger, ever writes it, so a
// standby's stale or empty ledger never overwrites the owner's spend.
//
// A store error is counted, logged and returned, and the write retried in
// the background until it succeeds (or Shutdown): the ledger in memory
// stays the truth meanwhile. No lock is held across the store call.
func (g *Guard) flush(ctx context.Context, l *ledger) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, writeTimeout)
		defer cancel()
	}
	l.mu.Lock()
	target := l.ver
	var werr chan error
	if l.saved < target && l.wneed > 0 && g.writable(l) == nil {
		// Both ledgers need a write: the worker's goes at the same time,
		// so the caller waits for one round trip, not two.
		g.wmu.Lock()
		if g.wsaved < l.wneed {
			need := l.wneed
			werr = make(chan error, 1)
			go func() { werr <- g.flushWorker(ctx, need) }()
		}
		g.wmu.Unlock()
	}
	for l.saved < target {
		if l.writing {
			ch := l.done
			l.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
			l.mu.Lock()
			continue
		}
		if err := g.writable(l); err != nil {
			l.saved, l.failing = l.ver, false // nothing of it is ever written
			l.mu.Unlock()
			g.o.Log.Warn("guardrail state not written", "agent", l.name, "reason", err)
			if werr != nil {
				<-werr
			}
			return err
		}
		l.writing, l.done = true, make(chan struct{})
		v := l.ver
		data, _ := json.Marshal(l.st)
		l.mu.Unlock()
		_, err := g.o.Store.Put(ctx, agentKey(l.name), data)
		l.mu.Lock()
		l.writing = false
		close(l.done)
		if err != nil {
			l.mu.Unlock()
			if werr != nil {
				<-werr
			}
			g.failed(l, "could not store the agent's spend; retrying (the ledger in memory still binds)", err)
			return err
		}
		l.saved = max(l.saved, v)
	}
	need := l.wneed
	l.mu.Unlock()
	if werr != nil {
		if err := <-werr; err != nil {
			g.failed(l, "could not store worker-wide spend; retrying (the ledger in memory still binds)", err)
			return err
		}
	}
	if err := g.flushWorker(ctx, need); err != nil {
		g.failed(l, "could not store worker-wide spend; retrying (the ledger in memory still binds)", err)
		return err
	}
	l.mu.Lock()
	if l.failing && l.saved >= l.ver {
		l.failing = false
		l.backoff = 0
		l.mu.Unlock()
		g.o.Log.Info("guardrail state stored after a failed write", "agent", l.name)
		return nil
	}
	l.mu.Unlock()
	return nil
}

// flushWorker writes the worker-wide ledger until the stored version is
// at least need, coalescing like flush: agents ending their turns together
// share one write.
func (g *Guard) flushWorker(ctx context.Context, need uint64) error {
	g.wmu.Lock()
	for g.wsaved < need {
		if g.wwriting {
			ch := g.wdone
			g.wmu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
			g.wmu.Lock()
			continue
		}
		g.wwriting, g.wdone = true, make(chan struct{})
		v := g.wver
		data, _ := json.Marshal(g.worker)
		g.wmu.Unlock()
		_, err := g.o.Store.Put(ctx, workerKey, data)
		g.wmu.Lock()
		g.wwriting = false
		close(g.wdone)
		if err != nil {
			g.wmu.Unlock()
			return err
		}
		g.wsaved = max(g.wsaved, v)
	}
	g.wmu.Unlock()
	return nil
}

// Retry delays of a failed ledger write.
const (
	retryMin = 250 * time.Millisecond
	retryMax = 30 * time.Second
)

// failed counts and logs a failed write and schedules its retry.
func (g *Guard) failed(l *ledger, msg string, err error) {
	g.failures.Add(1)
	g.o.Log.Error(msg, "agent", l.name, "error", err)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failing = true
	if l.retrying || g.closed.Load() {
		return
	}
	l.retrying = true
	l.backoff = min(max(2*l.backoff, retryMin), retryMax)
	g.o.Clock.AfterFunc(l.backoff, func() {
		l.mu.Lock()
		l.retrying = false
		l.mu.Unlock()
		if !g.closed.Load() {
			g.flushNow(l) // schedules the next retry if it fails again
		}
	})
}

// WriteFailures is how many ledger writes have failed (each is retried
// until it succeeds).
func (g *Guard) WriteFailures() uint64 { return g.failures.Load() }

// Unstored returns the agents whose ledger holds changes not yet stored
// (a write failed and is being retried, or a turn is running).
func (g *Guard) Unstored() []string {
	var out []string
	for _, l := range g.ledgers() {
		l.mu.Lock()
		if l.saved < l.ver {
			out = append(out, l.name)
		}
		l.mu.Unlock()
	}
	return out
}

// Flush stores every ledger this replica may write (see writable) with
// its latest state, and the worker-wide ledger; it returns the store's
// errors (a ledger it may not write is not one).
// FlushAgent writes the agent's ledger (and the worker-wide one its
// changes need) now, returning once the store holds every charge made so
// far. The driver calls it before it journals a model response, so a
// response replayed after a crash was charged exactly once. A ledger this
// replica may not write (not the owner, not loaded) is no error.
func (g *Guard) FlushAgent(ctx context.Context, agent string) error {
	l := g.ledger(agent)
	if l == nil {
		return nil
	}
	if err := g.flush(ctx, l); err != nil && !errors.Is(err, ErrNotOwner) && !errors.Is(err, ErrNotLoaded) {
		return err
	}
	return nil
}

func (g *Guard) Flush(ctx context.Context) error {
	var errs []error
	for _, l := range g.ledgers() {
		l.mu.Lock()
		g.wmu.Lock()
		dirty := l.saved < l.ver || l.failing || g.wsaved < l.wneed
		g.wmu.Unlock()
		l.mu.Unlock()
		if !dirty {
			continue
		}
		if err := g.flush(ctx, l); err != nil && !errors.Is(err, ErrNotOwner) && !errors.Is(err, ErrNotLoaded) {
			errs = append(errs, fmt.Errorf("agent %s: %w", l.name, err))
		}
	}
	return errors.Join(errs...)
}

// Shutdown stores everything not stored yet, retrying a failing store
// until it succeeds or ctx ends, and stops the background retries. Call
// it after the driver and the subagents have stopped, while this replica
// still holds its leases.
func (g *Guard) Shutdown(ctx context.Context) error {
	delay := retryMin
	for {
		err := g.Flush(ctx)
		if err == nil || ctx.Err() != nil {
			g.closed.Store(true)
			if err != nil {
				g.o.Log.Error("guardrail state not all stored before shutdown", "error", err, "agents", g.Unstored())
			}
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, retryMax)
	}
}
