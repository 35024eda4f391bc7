package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/store"
)

// Kind says what fired.
type Kind string

// Fire kinds.
const (
	KindSchedule  Kind = "schedule"
	KindTimer     Kind = "timer"
	KindHeartbeat Kind = "heartbeat"
)

// Outcomes of a schedule tick (the outcome label of schedule_runs_total).
const (
	OutcomeFired          = "fired"
	OutcomeMissed         = "missed"
	OutcomeSkippedOverlap = "skipped_overlap"
	OutcomeSkippedPaused  = "skipped_paused"
	OutcomeSkippedHalted  = "skipped_halted"
)

// Overlap policies.
const (
	OverlapSkip    = "skip"
	OverlapQueue   = "queue"
	OverlapReplace = "replace"
)

// EventScheduleRun is the event type published for every tick outcome.
// Data: schedule, outcome, due, next.
const EventScheduleRun = "schedule-run"

// Fire is one thing the scheduler delivers to an agent.
type Fire struct {
	Kind Kind
	// Schedule is the schedule's name (KindSchedule).
	Schedule string
	// Due is when it was meant to fire.
	Due time.Time
	// Prompt is the schedule's prompt.
	Prompt string
}

// Target is an agent as the scheduler sees it; the driver's agent
// implements it.
type Target interface {
	// Fire delivers a fire; it must not block on a turn.
	Fire(Fire)
	// Running reports whether a turn is running.
	Running() bool
	// Gate reports why no turn may start ("paused", "halted"), or "".
	Gate() string
	// PendingFire reports whether a fire of the schedule is waiting for
	// the next turn.
	PendingFire(schedule string) bool
	// Interrupt cancels the running turn (replace overlap).
	Interrupt(hold bool) bool
}

// Schedule is one cron schedule of an agent.
type Schedule struct {
	Name     string
	Cron     string
	Timezone string // IANA; "" is UTC
	Prompt   string
	Overlap  string // skip (default), queue, replace
	Jitter   time.Duration
	Enabled  bool
}

// Options configure a Scheduler.
type Options struct {
	Store  store.Store // required
	Clock  clock.Clock // default clock.Real()
	Log    *slog.Logger
	Events *events.Bus // optional: schedule-run events
	// Rand returns a random duration in [0, n) for jitter; default
	// math/rand.
	Rand func(n time.Duration) time.Duration
	// MaxMissed bounds how many missed ticks are counted one by one after
	// downtime (the rest are summed in one log line). Default 1000.
	MaxMissed int
	// Owner fences the scheduler's writes of an agent's durable state
	// (its timer, the last tick handled) and its claims of ticks: they are
	// made only while Owner says this replica owns the agent. Nil: this
	// process owns every agent (one replica).
	Owner Owner
}

// Owner says whether this replica owns an agent (holds its lease), so it
// alone may write the agent's durable state, and the fence of that lease,
// which the writes are made under (store.Store.Fenced): a write from a
// replica whose lease moved without its knowing (it was frozen) is
// refused by the store.
type Owner interface {
	Owns(agent string) bool
	// Fence returns the fence of the agent's lease held here; ok false
	// when this replica does not hold it surely.
	Fence(agent string) (f store.Fence, ok bool)
}

// Owns reports whether this replica may write agent's durable state:
// Options.Owner says it owns the agent, or no Owner is configured. The
// driver consults it for the agent's own writes too (pause).
func (s *Scheduler) Owns(agent string) bool { return s.o.Owner == nil || s.o.Owner.Owns(agent) }

// Fence returns the fence the agent's writes are made under: Options.
// Owner's, or the zero fence (plain writes) without an Owner; ok false
// when this replica must write nothing of the agent.
func (s *Scheduler) Fence(agent string) (store.Fence, bool) {
	if s.o.Owner == nil {
		return store.Fence{}, true
	}
	return s.o.Owner.Fence(agent)
}

// Writer returns the agent's writes under its fence; ok false when this
// replica must write nothing of the agent.
func (s *Scheduler) Writer(agent string) (store.Writer, bool) {
	f, ok := s.Fence(agent)
	if !ok {
		return nil, false
	}
	return store.Under(s.o.Store, f), true
}

// Scheduler owns every agent's schedules and timer.
type Scheduler struct {
	o Options

	mu      sync.Mutex
	agents  map[string]*agentEntry
	started bool
	stopped bool
}

type agentEntry struct {
	name      string
	target    Target
	schedules []*entry
	timer     *pendingTimer
}

type pendingTimer struct {
	at        time.Time
	heartbeat bool
	t         clock.Timer
}

// entry is one armed schedule.
type entry struct {
	agent *agentEntry
	s     Schedule
	cron  cron.Schedule
	next  time.Time // the tick the armed timer is for
	t     clock.Timer
	// retired: a reload replaced or removed the schedule (reshape.go);
	// it is never armed again. Under mu.
	retired bool
}

var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse parses a schedule's spec in its time zone.
func Parse(spec, timezone string) (cron.Schedule, error) {
	if timezone == "" {
		timezone = "UTC"
	}
	loc, err := time.LoadLocation(timezone)
	if err != nil {
		return nil, fmt.Errorf("timezone %q: %w", timezone, err)
	}
	s, err := parser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("bad cron %q: %w", spec, err)
	}
	if ss, ok := s.(*cron.SpecSchedule); ok {
		ss.Location = loc
		return onceADay{ss, loc}, nil
	}
	return s, nil
}

// onceADay keeps a wall-clock schedule from firing twice at the same
// local time when clocks go back (02:30 on an autumn change day happens
// twice; robfig/cron would fire both). Interval schedules (@every) are
// not wall-clock schedules and are not wrapped.
type onceADay struct {
	inner *cron.SpecSchedule
	loc   *time.Location
}

func (o onceADay) Next(t time.Time) time.Time {
	n := o.inner.Next(t)
	const wall = "2006-01-02 15:04:05"
	if !n.IsZero() && n.In(o.loc).Format(wall) == t.In(o.loc).Format(wall) {
		return o.inner.Next(n)
	}
	return n
}

// New returns a scheduler; Add agents, then Start it.
func New(o Options) *Scheduler {
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Rand == nil {
		o.Rand = func(n time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(n))) }
	}
	if o.MaxMissed == 0 {
		o.MaxMissed = 1000
	}
	return &Scheduler{o: o, agents: map[string]*agentEntry{}}
}

// Add registers an agent with its schedules. Disabled schedules are kept
// out; schedules that fire more than once a minute are allowed and logged.
func (s *Scheduler) Add(agent string, t Target, schedules []Schedule) error {
	a, err := s.entries(agent, t, schedules)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.agents[agent]; dup {
		return fmt.Errorf("agent %s added twice", agent)
	}
	s.agents[agent] = a
	return nil
}

// Start restores timers and counts ticks missed while no scheduler ran
// (for agents this replica owns), and arms every schedule. It fails only if the store cannot be read.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	agents := make([]*agentEntry, 0, len(s.agents))
	for _, a := range s.agents {
		agents = append(agents, a)
	}
	s.started = true
	s.mu.Unlock()
	for _, a := range agents {
		// An agent another replica owns is loaded when this one acquires
		// it (Reload), not here: its timer and missed ticks are the
		// owner's.
		if a.target.Gate() != "standby" {
			if err := s.load(ctx, a); err != nil {
				return err
			}
		}
		for _, e := range a.schedules {
			s.mu.Lock()
			s.arm(e, s.o.Clock.Now())
			s.mu.Unlock()
		}
	}
	return nil
}

// load restores a's stored timer and counts the ticks its schedules
// missed since a scheduler last handled them.
func (s *Scheduler) load(ctx context.Context, a *agentEntry) error {
	if err := s.restoreTimer(ctx, a); err != nil {
		return err
	}
	for _, e := range a.schedules {
		if err := s.countMissed(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// Stop disarms everything. Fires in progress finish.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for _, a := range s.agents {
		for _, e := range a.schedules {
			if e.t != nil {
				e.t.Stop()
			}
		}
		if a.timer != nil && a.timer.t != nil {
			a.timer.t.Stop()
		}
	}
}

// arm sets e's timer for its first tick after from. Callers hold mu.
func (s *Scheduler) arm(e *entry, from time.Time) {
	if s.stopped || e.retired {
		return
	}
	e.next = e.cron.Next(from)
	if e.next.IsZero() {
		s.o.Log.Warn("schedule has no future tick", "agent", e.agent.name, "schedule", e.s.Name)
		return
	}
	delay := e.next.Sub(s.o.Clock.Now())
	if e.s.Jitter > 0 {
		delay += s.o.Rand(e.s.Jitter)
	}
	due := e.next
	e.t = s.o.Clock.AfterFunc(delay, func() { s.tick(e, due) })
}

// Next returns when the agent's schedule next fires (zero if unknown).
func (s *Scheduler) Next(agent, schedule string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.agents[agent]; a != nil {
		for _, e := range a.schedules {
			if e.s.Name == schedule {
				return e.next
			}
		}
	}
	return time.Time{}
}

// Timezone returns the agent's schedule's IANA time zone ("" when unknown
// or UTC by default).
func (s *Scheduler) Timezone(agent, schedule string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.agents[agent]; a != nil {
		for _, e := range a.schedules {
			if e.s.Name == schedule {
				return e.s.Timezone
			}
		}
	}
	return ""
}

// lastKey records the latest tick a scheduler handled, for counting
// missed ticks after downtime.
func lastKey(agent, schedule string) string { return "sched." + agent + "." + schedule + ".last" }

func claimKey(agent, schedule string, due time.Time) string {
	return "sched." + agent + "." + schedule + ".claim." + strconv.FormatInt(due.Unix(), 10)
}

// tick handles the tick due at due: counts ticks skipped by a late
// timer, claims the tick, decides its outcome, and re-arms.
func (s *Scheduler) tick(e *entry, due time.Time) {
	now := s.o.Clock.Now()
	// A late timer (process stalled): fire only the latest due tick.
	missed := 0
	for n := e.cron.Next(due); !n.After(now) && !n.IsZero(); n = e.cron.Next(n) {
		s.report(e, OutcomeMissed, due, time.Time{})
		missed++
		due = n
	}
	if missed > 0 {
		s.o.Log.Warn("scheduler woke late; ticks missed", "agent", e.agent.name, "schedule", e.s.Name, "missed", missed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	outcome := s.claimAndFire(ctx, e, due)
	s.mu.Lock()
	s.arm(e, due)
	next := e.next
	s.mu.Unlock()
	if outcome != "" {
		s.report(e, outcome, due, next)
	}
}

// claimAndFire returns the tick's outcome, or "" if another scheduler
// claimed it.
func (s *Scheduler) claimAndFire(ctx context.Context, e *entry, due time.Time) string {
	if e.agent.target.Gate() == "standby" || !s.Owns(e.agent.name) {
		return "" // another replica owns the agent and fires its ticks
	}
	ttl := max(10*time.Minute, 2*intervalAt(e.cron, due))
	if _, err := s.o.Store.Create(ctx, claimKey(e.agent.name, e.s.Name, due), []byte("1"), ttl); err != nil {
		if errors.Is(err, store.ErrExists) {
			s.o.Log.Debug("tick claimed by another scheduler", "agent", e.agent.name, "schedule", e.s.Name, "due", due)
			return ""
		}
		// Without a claim there is no exactly-once; firing twice is worse
		// than a missed tick for an unattended agent.
		s.o.Log.Error("could not claim a tick; it is missed", "agent", e.agent.name, "schedule", e.s.Name, "due", due, "error", err)
		return OutcomeMissed
	}
	if data, err := json.Marshal(due); err == nil {
		w, ok := s.Writer(e.agent.name)
		if !ok {
			return "" // the lease went since the claim: the next owner fires it
		}
		if _, err := w.Put(ctx, lastKey(e.agent.name, e.s.Name), data); errors.Is(err, store.ErrFenced) {
			s.o.Log.Warn("tick not fired: the agent's lease moved", "agent", e.agent.name, "schedule", e.s.Name, "due", due)
			return ""
		} else if err != nil {
			s.o.Log.Warn("could not record the last tick", "agent", e.agent.name, "schedule", e.s.Name, "error", err)
		}
	}
	t := e.agent.target
	switch gate := t.Gate(); gate {
	case "paused":
		return OutcomeSkippedPaused
	case "":
	default:
		return OutcomeSkippedHalted
	}
	if t.Running() {
		switch e.s.Overlap {
		case OverlapQueue:
			if t.PendingFire(e.s.Name) {
				return OutcomeSkippedOverlap
			}
		case OverlapReplace:
			t.Interrupt(false)
		default:
			return OutcomeSkippedOverlap
		}
	}
	t.Fire(Fire{Kind: KindSchedule, Schedule: e.s.Name, Due: due, Prompt: e.s.Prompt})
	return OutcomeFired
}

// intervalAt is the gap between the tick after t and the one after that.
func intervalAt(c cron.Schedule, t time.Time) time.Duration {
	a := c.Next(t)
	return c.Next(a).Sub(a)
}

func (s *Scheduler) report(e *entry, outcome string, due, next time.Time) {
	log := s.o.Log.Info
	if outcome != OutcomeFired {
		log = s.o.Log.Warn
	}
	log("schedule tick", "agent", e.agent.name, "schedule", e.s.Name, "outcome", outcome, "due", due, "next", next)
	if s.o.Events != nil {
		data := map[string]any{"schedule": e.s.Name, "outcome": outcome, "due": due}
		if !next.IsZero() {
			data["next"] = next
		}
		s.o.Events.Publish(events.Event{Time: s.o.Clock.Now(), Agent: e.agent.name, Type: EventScheduleRun, Data: data})
	}
}

// countMissed counts the ticks between the last one a scheduler handled
// and now: they fell due while no scheduler ran.
func (s *Scheduler) countMissed(ctx context.Context, e *entry) error {
	var last time.Time
	found, err := store.GetJSON(ctx, s.o.Store, lastKey(e.agent.name, e.s.Name), &last)
	switch {
	case errors.Is(err, store.ErrUnreadable):
		s.o.Log.Warn("unreadable last tick ignored", "agent", e.agent.name, "schedule", e.s.Name, "error", err)
		return nil
	case err != nil:
		return fmt.Errorf("read last tick of %s/%s: %w", e.agent.name, e.s.Name, err)
	case !found:
		return nil
	}
	now := s.o.Clock.Now()
	n, latest := 0, last
	for t := e.cron.Next(last); !t.IsZero() && !t.After(now); t = e.cron.Next(t) {
		if n < s.o.MaxMissed {
			s.report(e, OutcomeMissed, t, time.Time{})
		}
		n++
		latest = t
	}
	if n > 0 {
		s.o.Log.Warn("ticks missed while no scheduler ran; not backfilled", "agent", e.agent.name, "schedule", e.s.Name, "missed", n, "since", last)
		w, ok := s.Writer(e.agent.name)
		if !ok {
			s.o.Log.Warn("last tick not written: this replica does not own the agent", "agent", e.agent.name, "schedule", e.s.Name)
			return nil
		}
		if data, err := json.Marshal(latest); err == nil {
			_, _ = w.Put(ctx, lastKey(e.agent.name, e.s.Name), data)
		}
	}
	return nil
}

// RunNow fires the agent's schedule now, as operators ask for it; the
// agent's gate still applies.
func (s *Scheduler) RunNow(agent, schedule string) error {
	s.mu.Lock()
	a := s.agents[agent]
	var e *entry
	if a != nil {
		for _, x := range a.schedules {
			if x.s.Name == schedule {
				e = x
			}
		}
	}
	s.mu.Unlock()
	switch {
	case a == nil:
		return fmt.Errorf("unknown agent %q", agent)
	case e == nil:
		return fmt.Errorf("agent %q has no enabled schedule %q", agent, schedule)
	}
	if gate := a.target.Gate(); gate != "" {
		return fmt.Errorf("agent %q is %s", agent, gate)
	}
	now := s.o.Clock.Now()
	a.target.Fire(Fire{Kind: KindSchedule, Schedule: schedule, Due: now, Prompt: e.s.Prompt})
	s.report(e, OutcomeFired, now, s.Next(agent, schedule))
	return nil
}
