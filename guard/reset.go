package guard

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/money"
)

// ErrUnknown: no such agent or guardrail.
var ErrUnknown = errors.New("unknown agent or guardrail")

// The bounds of an added budget (Reset), so that no ceiling, view, event
// or stored ledger ever holds +Inf or NaN, and an amount keeps its
// micro-dollars exact (a float64 does up to about $9e9).
const (
	// MaxAddBudgetUSD is the most one reset may add: $1,000,000.
	MaxAddBudgetUSD = 1_000_000
	// MaxCeilingUSD is the most resets may lift a ceiling to (its
	// configured amount plus every budget added): $1,000,000,000.
	MaxCeilingUSD = 1_000_000_000
)

// ErrBudget is wrapped by Reset's error for an added budget that is not
// a finite amount from $0 to MaxAddBudgetUSD, or that would lift a
// ceiling above MaxCeilingUSD (HTTP and the NATS control verb: 400). The
// message names the limit.
var ErrBudget = errors.New("added budget out of bounds")

// RefusedError is a reset that would trip again at once (HTTP 409). It
// carries the numbers an operator needs.
type RefusedError struct {
	Guardrail string  `json:"guardrail"`
	Spent     float64 `json:"spent_usd"`
	Ceiling   float64 `json:"ceiling_usd"`
	// MinAddUSD is the least whole-cent budget that would let the agent
	// run again: more than spend's excess over the ceiling, rounded up to
	// the cent (so $0.01 when $0.00002 is missing).
	MinAddUSD float64 `json:"min_add_budget_usd"`
}

// Error states the real shortfall (spend over the ceiling) in money.USD's
// format, and MinAddUSD as an amount that will do: "reset of daily_usd
// refused: spent $0.00012 against a ceiling of $0.0001 would trip again at
// once; $0.00002 over it: add more than $0.00002 (e.g. $0.01)".
func (e *RefusedError) Error() string {
	head := fmt.Sprintf("reset of %s refused: spent %s against a ceiling of %s would trip again at once", e.Guardrail, money.USD(e.Spent), money.USD(e.Ceiling))
	if over := e.Spent - e.Ceiling; over > 0 {
		return fmt.Sprintf("%s; %s over it: add more than %s (e.g. %s)", head, money.USD(over), money.USD(over), money.USD(e.MinAddUSD))
	}
	return fmt.Sprintf("%s; add any budget (e.g. %s)", head, money.USD(e.MinAddUSD))
}

// ResetResult says what a reset did. CeilingUSD and SpentUSD are the
// numbers after it; CeilingBeforeUSD the ceiling before (spend is never
// changed by a reset). Turn and watchdog resets have no ceiling to raise:
// their numbers are the turn's, and 0 for the watchdog.
type ResetResult struct {
	Guardrail        string  `json:"guardrail"`
	AddedUSD         float64 `json:"added_budget_usd"`
	CeilingUSD       float64 `json:"ceiling_usd,omitempty"`
	CeilingBeforeUSD float64 `json:"ceiling_before_usd,omitempty"`
	SpentUSD         float64 `json:"spent_usd"`
	// Cleared is true when the reset lifted a trip and reopened the agent.
	Cleared bool `json:"cleared"`
}

// Reset lifts a guardrail's trip and/or adds budget. Spend is never
// lowered. Cost guardrails (session_usd, daily_usd, worker_daily_usd)
// refuse a reset that leaves spend at or above the ceiling, with a
// *RefusedError. turn_usd and watchdog trips clear (a new turn starts at
// $0; the watchdog's detectors start over); adding budget to them is an
// error. An added budget must be finite, from $0 to MaxAddBudgetUSD, and
// may not lift a ceiling above MaxCeilingUSD (ErrBudget otherwise,
// naming the limit): no ceiling is ever +Inf or NaN.
//
// Only the agent's owner, once it has loaded the stored ledger, resets:
// elsewhere Reset changes nothing and returns an error wrapping
// ErrNotOwner (another replica owns the agent) or ErrNotLoaded (not
// restored yet), so the refusal's numbers and the stored spend are always
// the owner's.
func (g *Guard) Reset(agent, guardrail string, addUSD float64) (ResetResult, error) {
	return g.ResetAs(agent, guardrail, addUSD, hook.Audit{})
}

// ResetAs is Reset on behalf of by. Every reset that succeeds — whether or
// not it lifted a trip — emits one guardrail-reset event for the agent
// with the audit trail: by and reason (when set), guardrail,
// add_budget_usd, spent_before_usd and ceiling_before_usd,
// spent_after_usd and ceiling_after_usd (ceilings 0 when none), and
// cleared. A worker_daily_usd reset that reopens other agents emits one
// for each of them too, naming the agent it was asked for (reset_agent).
// A refused reset changes nothing and emits no event; it is logged.
func (g *Guard) ResetAs(agent, guardrail string, addUSD float64, by hook.Audit) (ResetResult, error) {
	if !(addUSD >= 0 && addUSD <= MaxAddBudgetUSD) { // NaN fails both
		return ResetResult{}, fmt.Errorf("%w: add_budget_usd must be a finite amount from $0 to at most %s a reset; got %v",
			ErrBudget, money.USD(MaxAddBudgetUSD), addUSD)
	}
	l := g.ledger(agent)
	if l == nil {
		return ResetResult{}, fmt.Errorf("%w: agent %q", ErrUnknown, agent)
	}
	l.mu.Lock()
	if err := g.writable(l); err != nil {
		l.mu.Unlock()
		g.o.Log.Warn("guardrail reset refused", "agent", agent, "guardrail", guardrail, "reason", err)
		return ResetResult{}, fmt.Errorf("reset of %s refused: %w", guardrail, err)
	}
	if changed, _ := g.rollDay(l); changed {
		g.markLocked(l)
	}
	res, others, err := g.resetLocked(l, guardrail, addUSD)
	// The reopening calls run last, once the reset is stored and
	// announced: its event comes before anything the reopened agents do.
	// The reopenings run last, in ticket order (this agent's first),
	// once the reset is stored and announced: its event comes before
	// anything the reopened agents do.
	calls := []func(){g.release(l)}
	defer func() {
		for _, f := range calls {
			f()
		}
	}()
	if err != nil {
		return res, err
	}
	// audit is the reset's event data.
	audit := func() map[string]any {
		d := by.Fields()
		d["guardrail"], d["add_budget_usd"], d["cleared"] = guardrail, addUSD, res.Cleared
		d["spent_before_usd"], d["spent_after_usd"] = res.SpentUSD, res.SpentUSD
		d["ceiling_before_usd"], d["ceiling_after_usd"] = res.CeilingBeforeUSD, res.CeilingUSD
		return d
	}
	if others {
		// The worker-wide trip is lifted: every other agent reopens
		// (unless a trip of its own still holds it) and is told.
		for _, x := range g.ledgers() {
			if x == l {
				continue
			}
			d := audit()
			d["reset_agent"] = agent
			x.mu.Lock()
			g.reopenLocked(x, guardrail, d)
			calls = append(calls, g.release(x))
		}
	}
	if err := g.flushWithin(l); errors.Is(err, ErrNotOwner) || errors.Is(err, ErrNotLoaded) {
		return ResetResult{}, err
	}
	g.announceReset(l, guardrail, audit(), by)
	return res, nil
}

// resetLocked changes the ledgers for ResetAs. Callers hold l.mu.
// others: the worker-wide trip was lifted, and the other agents are to
// reopen.
func (g *Guard) resetLocked(l *ledger, guardrail string, addUSD float64) (res ResetResult, others bool, err error) {
	res = ResetResult{Guardrail: guardrail, AddedUSD: addUSD}
	switch guardrail {
	case Session, Daily:
		limit, spent, added := l.limits.SessionUSD, l.st.SessionSpent, &l.st.SessionAdded
		if guardrail == Daily {
			limit, spent, added = l.limits.DailyUSD, l.st.DaySpent, &l.st.DayAdded
		}
		if limit <= 0 {
			return res, false, fmt.Errorf("agent %q has no %s ceiling configured; there is nothing to reset", l.name, guardrail)
		}
		ceiling := limit + *added
		if err := ceilingBound(guardrail, ceiling, addUSD); err != nil {
			return res, false, err
		}
		if spent >= ceiling+addUSD {
			return res, false, &RefusedError{Guardrail: guardrail, Spent: spent, Ceiling: ceiling, MinAddUSD: roundUpCents(spent - ceiling)}
		}
		*added += addUSD
		g.markLocked(l)
		res.CeilingBeforeUSD, res.CeilingUSD, res.SpentUSD = ceiling, ceiling+addUSD, spent
	case WorkerDaily:
		if g.o.WorkerDailyUSD <= 0 {
			return res, false, fmt.Errorf("no worker-wide daily ceiling is configured; there is nothing to reset")
		}
		g.wmu.Lock()
		ceiling := g.workerCeiling()
		if err := ceilingBound(guardrail, ceiling, addUSD); err != nil {
			g.wmu.Unlock()
			return res, false, err
		}
		if g.worker.Spent >= ceiling+addUSD {
			spent := g.worker.Spent
			g.wmu.Unlock()
			return res, false, &RefusedError{Guardrail: guardrail, Spent: spent, Ceiling: ceiling, MinAddUSD: roundUpCents(spent - ceiling)}
		}
		g.worker.Added += addUSD
		res.CeilingBeforeUSD, res.CeilingUSD, res.SpentUSD = ceiling, ceiling+addUSD, g.worker.Spent
		if g.worker.Trip != nil {
			g.worker.Trip = nil
			res.Cleared = true
			others = true
		}
		g.markWorkerLocked(l)
		g.wmu.Unlock()
		if others {
			g.reopenLocked(l, guardrail, nil)
		}
		return res, others, nil
	case Turn, Watchdog:
		if addUSD > 0 {
			return res, false, fmt.Errorf("%s takes no added budget: each turn starts at $0", guardrail)
		}
		if guardrail == Turn {
			res.SpentUSD, res.CeilingUSD, res.CeilingBeforeUSD = l.turnSpent, l.limits.TurnUSD, l.limits.TurnUSD
		}
	default:
		return res, false, fmt.Errorf("%w: guardrail %q (want %s, %s, %s, %s or %s)", ErrUnknown, guardrail, Turn, Session, Daily, WorkerDaily, Watchdog)
	}
	if t := l.st.Trip; t != nil && t.Guardrail == guardrail {
		l.st.Trip = nil
		g.markLocked(l)
		res.Cleared = true
		g.reopenLocked(l, guardrail, nil)
	}
	return res, false, nil
}

// announceReset logs and emits a reset that succeeded, with its audit
// data.
func (g *Guard) announceReset(l *ledger, guardrail string, data map[string]any, by hook.Audit) {
	g.o.Log.Info("guardrail reset", "agent", l.name, "guardrail", guardrail, "by", by.By, "reason", by.Reason,
		"add_budget_usd", data["add_budget_usd"], "spent_usd", data["spent_after_usd"],
		"ceiling_before_usd", data["ceiling_before_usd"], "ceiling_after_usd", data["ceiling_after_usd"], "cleared", data["cleared"])
	g.emit(l.name, EventReset, data)
}

// reopenLocked schedules the agent's reopening after a lifted trip unless
// another trip still holds it, and emits data as its guardrail-reset
// event when it is not nil (the caller announces the agent it reset
// itself). Callers hold l.mu, not wmu.
func (g *Guard) reopenLocked(l *ledger, guardrail string, data map[string]any) {
	if data != nil {
		g.o.Log.Info("guardrail reset", "agent", l.name, "guardrail", guardrail)
		g.emit(l.name, EventReset, data)
	}
	g.wmu.Lock()
	defer g.wmu.Unlock()
	if l.st.Trip != nil || g.worker.Trip != nil {
		return
	}
	if ctl := g.ctl(l.name); ctl != nil {
		g.orderedLocked(l, ctl.ClearHalt)
	}
}

func roundUpCents(usd float64) float64 { return math.Ceil(usd*100+1e-9) / 100 }

// ceilingBound refuses (ErrBudget) adding addUSD to a ceiling when it
// would lift it above MaxCeilingUSD. Adding nothing is never refused,
// whatever the configured ceiling.
func ceilingBound(guardrail string, ceiling, addUSD float64) error {
	if addUSD > 0 && ceiling+addUSD > MaxCeilingUSD {
		return fmt.Errorf("%w: adding %s to the %s ceiling of %s would make it %s; a ceiling may be at most %s",
			ErrBudget, money.USD(addUSD), guardrail, money.USD(ceiling), money.USD(ceiling+addUSD), money.USD(MaxCeilingUSD))
	}
	return nil
}

// Ceiling is one ceiling's state.
type Ceiling struct {
	// Guardrail is the window's guardrail name, as reset takes it
	// (turn_usd, session_usd, daily_usd, worker_daily_usd).
	Guardrail  string  `json:"guardrail"`
	SpentUSD   float64 `json:"spent_usd"`
	CeilingUSD float64 `json:"ceiling_usd,omitempty"` // 0: none
	// RemainingUSD is what may still be spent before the ceiling trips
	// (never below 0); nil without a ceiling.
	RemainingUSD *float64 `json:"remaining_usd,omitempty"`
	// ResetsAt is when the window starts over: the next midnight in
	// guardrails.timezone for the daily windows; nil for the turn (each
	// turn starts at 0) and the session (it never starts over by itself:
	// a reset adds budget).
	ResetsAt *time.Time `json:"resets_at,omitempty"`
}

// ceiling is a Ceiling with its amounts rounded to micro-dollars (no
// float noise such as 1.2000000000000002) and what remains.
func ceiling(guardrail string, spent, limit float64, resets *time.Time) Ceiling {
	c := Ceiling{Guardrail: guardrail, SpentUSD: micro(spent), CeilingUSD: micro(limit), ResetsAt: resets}
	if limit > 0 {
		left := micro(max(limit-spent, 0))
		c.RemainingUSD = &left
	}
	return c
}

// micro rounds usd to micro-dollars.
func micro(usd float64) float64 { return math.Round(usd*1e6) / 1e6 }

// Status is an agent's spend against its ceilings.
type Status struct {
	Model       string  `json:"model"`
	Priced      bool    `json:"priced"`
	Turn        Ceiling `json:"turn"`
	Session     Ceiling `json:"session"`
	Daily       Ceiling `json:"daily"`
	WorkerDaily Ceiling `json:"worker_daily"`
	Trip        *Trip   `json:"trip,omitempty"`
	// Timezone names the zone whose midnight starts the daily windows
	// over (guardrails.timezone; "UTC" by default).
	Timezone string `json:"timezone"`
	// TripLiftsAt is when Trip lifts by itself: the next midnight in
	// Timezone for a daily_usd or worker_daily_usd trip. Nil without a
	// trip and for the other guardrails, which only a reset lifts.
	TripLiftsAt *time.Time `json:"trip_lifts_at,omitempty"`
}

// Status reports the agent's spend and ceilings.
func (g *Guard) Status(agent string) (Status, bool) {
	l := g.ledger(agent)
	if l == nil {
		return Status{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	g.wmu.Lock()
	defer g.wmu.Unlock()
	session, daily := l.ceilings()
	now := g.o.Clock.Now().In(g.o.Location)
	midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, g.o.Location)
	s := Status{
		Model: l.model, Priced: l.priced,
		Turn:        ceiling(Turn, l.turnSpent, l.limits.TurnUSD, nil),
		Session:     ceiling(Session, l.st.SessionSpent, session, nil),
		Daily:       ceiling(Daily, l.st.DaySpent, daily, &midnight),
		WorkerDaily: ceiling(WorkerDaily, g.worker.Spent, g.workerCeiling(), &midnight),
		Trip:        l.st.Trip,
	}
	if s.Trip == nil {
		s.Trip = g.worker.Trip
	}
	s.Timezone = g.o.Location.String()
	if s.Trip != nil && (s.Trip.Guardrail == Daily || s.Trip.Guardrail == WorkerDaily) {
		s.TripLiftsAt = &midnight
	}
	return s, true
}
