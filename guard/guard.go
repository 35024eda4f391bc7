package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
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
	// EventModelError: a model call failed. Data: model, error.
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
	name     string
	model    string
	price    Price
	priced   bool
	limits   Limits
	ctl      driver.Control
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
}

// Guard holds every agent's ledger. It implements driver.Guard.
type Guard struct {
	o      Options
	mu     sync.Mutex
	agents map[string]*ledger
	worker workerState
	wload  bool // worker state loaded
	day    clock.Timer
	// after holds calls into agents (halt, note, reopen) decided under mu
	// and made once it is released: the driver calls the guard while
	// holding an agent's lock, so the guard must never call an agent
	// while holding its own.
	after []func()
}

// unlock releases mu and makes the calls decided under it, in order.
func (g *Guard) unlock() {
	calls := g.after
	g.after = nil
	g.mu.Unlock()
	for _, f := range calls {
		f()
	}
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
	return &Guard{o: o, agents: map[string]*ledger{}}
}

// AddAgent registers an agent, its model's name (for pricing) and its
// limits. An unpriced model is logged as a warning here.
func (g *Guard) AddAgent(agent, model string, l Limits) {
	price, ok := g.o.Prices.Lookup(model)
	if !ok {
		g.o.Log.Warn("model has no price: it costs $0 here and no cost ceiling binds it; token and turn caps still apply", "agent", agent, "model", model)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.agents[agent] = &ledger{name: agent, model: model, price: price, priced: ok, limits: l}
}

// AddFallbacks warns, as AddAgent does for the agent's model, about each
// of the agent's fallback models that has no price: a response it serves
// costs $0 and no cost ceiling binds it. Their responses are priced by
// their own names (see ServedByKey) whether or not they were added here.
func (g *Guard) AddFallbacks(agent string, models ...string) {
	for _, m := range models {
		if _, ok := g.o.Prices.Lookup(m); !ok {
			g.o.Log.Warn("fallback model has no price: its responses cost $0 here and no cost ceiling binds them; token and turn caps still apply", "agent", agent, "model", m)
		}
	}
}

// PricedModel reports whether model has a price.
func (g *Guard) PricedModel(model string) bool {
	_, ok := g.o.Prices.Lookup(model)
	return ok
}

// Priced reports whether the agent's model has a price.
func (g *Guard) Priced(agent string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	l := g.agents[agent]
	return l != nil && l.priced
}

// Attach implements driver.Guard.
func (g *Guard) Attach(agent string, ctl driver.Control) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if l := g.agents[agent]; l != nil {
		l.ctl = ctl
	}
}

func agentKey(agent string) string { return "guard." + agent }

const workerKey = "guard._worker"

func (g *Guard) today() string { return g.o.Clock.Now().In(g.o.Location).Format(time.DateOnly) }

// Restore implements driver.Guard: it loads the agent's spend and trip
// (and, once, the worker's) and re-halts a tripped agent.
func (g *Guard) Restore(ctx context.Context, agent string) error {
	g.mu.Lock()
	l := g.agents[agent]
	needWorker := !g.wload
	g.mu.Unlock()
	if l == nil {
		return nil
	}
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
	g.mu.Lock()
	if needWorker && !g.wload {
		g.worker, g.wload = ws, true
	}
	l.st, l.restored = st, true
	g.rollDay(l)
	trip := l.st.Trip
	if trip == nil && g.worker.Trip != nil {
		trip = g.worker.Trip
	}
	ctl := l.ctl
	g.mu.Unlock()
	if trip != nil && ctl != nil {
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
// hold mu.
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

// save stores the agent's and the worker's ledgers. Callers hold mu;
// the write is quick (a local or nearby store) and keeps the order of
// updates. It writes nothing, logs and returns the reason, when the
// ledger is not writable here (see writable): only the owner, once it has
// loaded the stored ledger, ever writes it, so a standby's stale or empty
// ledger never overwrites the owner's spend.
func (g *Guard) save(l *ledger) error {
	if err := g.writable(l); err != nil {
		g.o.Log.Warn("guardrail state not written", "agent", l.name, "reason", err)
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data, _ := json.Marshal(l.st)
	if _, err := g.o.Store.Put(ctx, agentKey(l.name), data); err != nil {
		g.o.Log.Error("could not store spend; it will not survive a restart", "agent", l.name, "error", err)
	}
	data, _ = json.Marshal(g.worker)
	if _, err := g.o.Store.Put(ctx, workerKey, data); err != nil {
		g.o.Log.Error("could not store worker-wide spend", "error", err)
	}
	return nil
}

// rollDay starts a new day's ledger when the calendar day changed; a
// daily trip of the old day is lifted. Callers hold mu. It reports
// whether a daily trip was lifted.
func (g *Guard) rollDay(l *ledger) bool {
	today := g.today()
	lifted := false
	if g.worker.Day != today {
		if g.worker.Trip != nil {
			lifted = true
		}
		g.worker = workerState{Day: today}
	}
	if l != nil && l.st.Day != today {
		l.st.Day, l.st.DaySpent, l.st.DayAdded = today, 0, 0
		if l.st.Trip != nil && l.st.Trip.Guardrail == Daily {
			l.st.Trip = nil
			lifted = true
		}
	}
	return lifted
}

// ErrTripped is wrapped by Admit's error for a tripped agent.
var ErrTripped = errors.New("guardrail tripped")

// Admit implements driver.Guard: a tripped agent, or one already at a
// ceiling, gets no turn.
func (g *Guard) Admit(_ context.Context, agent string) error {
	g.mu.Lock()
	defer g.unlock()
	l := g.agents[agent]
	if l == nil {
		return nil
	}
	if g.rollDay(l) {
		_ = g.save(l)
	}
	if t := l.st.Trip; t != nil {
		return fmt.Errorf("%w: %s", ErrTripped, t.Reason)
	}
	if t := g.worker.Trip; t != nil {
		return fmt.Errorf("%w: %s", ErrTripped, t.Reason)
	}
	if trip := g.crossed(l, false); trip != nil {
		g.tripLocked(l, trip)
		return fmt.Errorf("%w: %s", ErrTripped, trip.Reason)
	}
	return nil
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

func (g *Guard) workerCeiling() float64 {
	if g.o.WorkerDailyUSD <= 0 {
		return 0
	}
	return g.o.WorkerDailyUSD + g.worker.Added
}

// crossed returns the first ceiling the agent has reached, if any; the
// turn ceiling only inside a turn. Callers hold mu.
func (g *Guard) crossed(l *ledger, inTurn bool) *Trip {
	now := g.o.Clock.Now()
	session, daily := l.ceilings()
	switch {
	case inTurn && l.limits.TurnUSD > 0 && l.turnSpent >= l.limits.TurnUSD:
		return &Trip{Guardrail: Turn, At: now, Spent: l.turnSpent, Ceiling: l.limits.TurnUSD,
			Reason: fmt.Sprintf("turn cost $%.4f reached the per-turn ceiling of $%.4f", l.turnSpent, l.limits.TurnUSD)}
	case session > 0 && l.st.SessionSpent >= session:
		return &Trip{Guardrail: Session, At: now, Spent: l.st.SessionSpent, Ceiling: session,
			Reason: fmt.Sprintf("session spend $%.4f reached the session ceiling of $%.4f", l.st.SessionSpent, session)}
	case daily > 0 && l.st.DaySpent >= daily:
		return &Trip{Guardrail: Daily, At: now, Spent: l.st.DaySpent, Ceiling: daily,
			Reason: fmt.Sprintf("spend today (%s) $%.4f reached the daily ceiling of $%.4f", l.st.Day, l.st.DaySpent, daily)}
	case g.workerCeiling() > 0 && g.worker.Spent >= g.workerCeiling():
		return &Trip{Guardrail: WorkerDaily, At: now, Spent: g.worker.Spent, Ceiling: g.workerCeiling(),
			Reason: fmt.Sprintf("worker-wide spend today (%s) $%.4f reached the worker daily ceiling of $%.4f", g.worker.Day, g.worker.Spent, g.workerCeiling())}
	}
	return nil
}

// tripLocked records a trip, halts the agent (every agent for the
// worker-wide ceiling) and announces it. Callers hold mu; the halts run
// after it is released.
func (g *Guard) tripLocked(l *ledger, t *Trip) {
	var halt []*ledger
	if t.Guardrail == WorkerDaily {
		g.worker.Trip = t
		for _, x := range g.agents {
			halt = append(halt, x)
		}
	} else {
		l.st.Trip = t
		halt = []*ledger{l}
	}
	_ = g.save(l)
	g.o.Log.Warn("guardrail tripped: agent halted", "agent", l.name, "guardrail", t.Guardrail, "spent_usd", t.Spent, "ceiling_usd", t.Ceiling, "reason", t.Reason)
	for _, x := range halt {
		g.emit(x.name, EventTripped, map[string]any{"guardrail": t.Guardrail, "reason": t.Reason, "spent_usd": t.Spent, "ceiling_usd": t.Ceiling})
	}
	for _, x := range halt {
		if ctl := x.ctl; ctl != nil {
			g.after = append(g.after, func() { ctl.Halt(t.Reason) })
		}
	}
	if t.Guardrail == Daily || t.Guardrail == WorkerDaily {
		g.armDayBoundaryLocked()
	}
}

// Trip records a trip raised elsewhere (the watchdog) so it is stored and
// survives a restart, and halts the agent.
func (g *Guard) Trip(agent, guardrail, reason string) {
	g.mu.Lock()
	defer g.unlock()
	if l := g.agents[agent]; l != nil {
		g.tripLocked(l, &Trip{Guardrail: guardrail, Reason: reason, At: g.o.Clock.Now()})
	}
}

func (g *Guard) emit(agent, typ string, data map[string]any) {
	if g.o.Events != nil {
		g.o.Events.Publish(events.Event{Time: g.o.Clock.Now(), Agent: agent, Type: typ, Data: data})
	}
}

func (g *Guard) armDayBoundary() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armDayBoundaryLocked()
}

// armDayBoundaryLocked wakes the guard at the next midnight in its time
// zone to lift daily trips. Callers hold mu.
func (g *Guard) armDayBoundaryLocked() {
	if g.day != nil {
		return
	}
	now := g.o.Clock.Now().In(g.o.Location)
	y, m, d := now.Date()
	midnight := time.Date(y, m, d+1, 0, 0, 0, 0, g.o.Location)
	g.day = g.o.Clock.AfterFunc(midnight.Sub(now), g.newDay)
}

// newDay lifts daily trips and reopens the agents they halted.
func (g *Guard) newDay() {
	g.mu.Lock()
	g.day = nil
	workerTripped := g.worker.Trip != nil
	var reopen []*ledger
	for _, l := range g.agents {
		wasDaily := l.st.Trip != nil && l.st.Trip.Guardrail == Daily
		g.rollDay(l)
		if (wasDaily || workerTripped) && l.st.Trip == nil {
			reopen = append(reopen, l)
		}
		if g.o.Owner == nil || g.o.Owner.Owns(l.name) {
			_ = g.save(l) // another replica's agent is its owner's to roll
		}
	}
	g.mu.Unlock()
	for _, l := range reopen {
		g.o.Log.Info("new day: daily guardrail lifted", "agent", l.name)
		g.emit(l.name, EventReset, map[string]any{"guardrail": Daily, "reason": "new day"})
		if l.ctl != nil {
			l.ctl.ClearHalt()
		}
	}
}

// Charge adds usd to the agent's spend from outside a model call (a
// subagent's spend counts against its parent) and trips a crossed
// ceiling.
func (g *Guard) Charge(agent string, usd float64) {
	g.mu.Lock()
	defer g.unlock()
	if l := g.agents[agent]; l != nil {
		g.addSpend(l, usd)
		if t := g.crossed(l, l.inTurn); t != nil && l.st.Trip == nil && g.worker.Trip == nil {
			g.tripLocked(l, t)
		} else {
			_ = g.save(l)
		}
	}
}

func (g *Guard) addSpend(l *ledger, usd float64) {
	g.rollDay(l)
	l.st.SessionSpent += usd
	l.st.DaySpent += usd
	g.worker.Spent += usd
	if l.inTurn {
		l.turnSpent += usd
	}
}
