package guard

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/hook"
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
	// the agent's, or the fallback named by the response (hook.ServedByKey).
	EventCharged = "model-usage"
	// EventModelError: a model call failed. Data: model (the agent's, or
	// the one an operator switched it to, as the error names it:
	// models.ServedError), error.
	EventModelError = "model-error"
	// EventToolCall: a tool call finished. Data: tool, outcome (ok|error).
	EventToolCall = "tool-call"
)

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
// alone may write the agent's durable state, and gives the fence of that
// lease: the ledger is written under it (store.Store.Fenced), so a
// replica whose lease moved while it was frozen writes nothing. The
// worker's is backed by lease.Manager.Fence.
type Owner interface {
	Owns(agent string) bool
	Fence(agent string) (f store.Fence, ok bool)
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

// Guard holds every agent's ledger. It implements hook.Guard.
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
	ctls   map[string]hook.Control

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

// The guard is a hook.Guard, with every optional method the driver looks
// for.
var (
	_ hook.Guard         = (*Guard)(nil)
	_ hook.Meter         = (*Guard)(nil)
	_ hook.Pricer        = (*Guard)(nil)
	_ hook.Charger       = (*Guard)(nil)
	_ hook.ChargeFlusher = (*Guard)(nil)
	_ hook.SideCallGuard = (*Guard)(nil)
	_ hook.Keeper        = (*Guard)(nil)
)

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
	g := &Guard{o: o, agents: map[string]*ledger{}, ctls: map[string]hook.Control{}}
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

func (g *Guard) ctl(agent string) hook.Control {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.ctls[agent]
}

// AddFallbacks warns, as AddAgent does for the agent's model, about each
// of the agent's fallback models that has no price: a response it serves
// costs $0 and no cost ceiling binds it. Their responses are priced by
// their own names (see hook.ServedByKey) whether or not they were added here.
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

// Attach implements hook.Guard.
func (g *Guard) Attach(agent string, ctl hook.Control) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.agents[agent] != nil {
		g.ctls[agent] = ctl
	}
}

func (g *Guard) emit(agent, typ string, data map[string]any) {
	if g.o.Events != nil {
		g.o.Events.Publish(events.Event{Time: g.o.Clock.Now(), Agent: agent, Type: typ, Data: data})
	}
}
