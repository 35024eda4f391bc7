package scheduler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	_ "time/tzdata"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

func TestFireTimes(t *testing.T) {
	t.Parallel()
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name, spec, tz, from string
		want                 []string
	}{
		{"every 15 minutes", "*/15 * * * *", "", "2026-11-29T08:07:00Z",
			[]string{"2026-11-29T08:15:00Z", "2026-11-29T08:30:00Z", "2026-11-29T08:45:00Z"}},
		{"with seconds", "30 */2 * * * *", "", "2026-11-29T08:00:00Z",
			[]string{"2026-11-29T08:00:30Z", "2026-11-29T08:02:30Z"}},
		{"@every 10m", "@every 10m", "", "2026-11-29T08:00:00Z",
			[]string{"2026-11-29T08:10:00Z", "2026-11-29T08:20:00Z"}},
		{"@daily in Berlin", "@daily", "Europe/Berlin", "2026-11-29T12:00:00Z",
			[]string{"2026-11-29T23:00:00Z", "2026-11-30T23:00:00Z"}},
		{"weekdays 08:00 Berlin across spring DST", "0 8 * * MON-FRI", "Europe/Berlin", "2026-03-26T12:00:00Z",
			// Fri 27 Mar 08:00 CET = 07:00Z; the clocks go forward on Sun 29 Mar;
			// Mon 30 Mar 08:00 CEST = 06:00Z.
			[]string{"2026-03-27T07:00:00Z", "2026-03-30T06:00:00Z", "2026-03-31T06:00:00Z"}},
		{"02:30 Berlin on the spring change day", "30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z",
			// 02:30 does not exist on 29 Mar (02:00 -> 03:00): it is not invented.
			[]string{"2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"}},
		{"02:30 Berlin on the autumn change day", "30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z",
			// 02:30 happens twice on 25 Oct (CEST then CET): it fires once.
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"weekdays 08:00 Berlin across autumn DST", "0 8 * * MON-FRI", "Europe/Berlin", "2026-10-22T12:00:00Z",
			[]string{"2026-10-23T06:00:00Z", "2026-10-26T07:00:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(tc.spec, tc.tz)
			if err != nil {
				t.Fatal(err)
			}
			at := utc(tc.from)
			for i, w := range tc.want {
				at = c.Next(at)
				if !at.Equal(utc(w)) {
					t.Fatalf("fire %d = %s, want %s", i+1, at.UTC().Format(time.RFC3339), w)
				}
			}
		})
	}
}

// target is a fake agent: tests set whether a turn runs and the gate.
type target struct {
	mu          sync.Mutex
	fires       []Fire
	running     bool
	gate        string
	pending     map[string]bool
	interrupted int
}

func (t *target) Fire(f Fire) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.fires = append(t.fires, f)
	if t.running {
		if t.pending == nil {
			t.pending = map[string]bool{}
		}
		t.pending[f.Schedule] = true
	}
}
func (t *target) Running() bool { t.mu.Lock(); defer t.mu.Unlock(); return t.running }
func (t *target) Gate() string  { t.mu.Lock(); defer t.mu.Unlock(); return t.gate }
func (t *target) PendingFire(s string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pending[s]
}
func (t *target) Interrupt(bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.interrupted++
	return t.running
}
func (t *target) count() int { t.mu.Lock(); defer t.mu.Unlock(); return len(t.fires) }
func (t *target) set(running bool, gate string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.running, t.gate = running, gate
	if !running {
		t.pending = nil
	}
}

var start = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

type rig struct {
	clock   *clock.Fake
	store   store.Store
	bus     *events.Bus
	sub     *events.Subscription
	outcome map[string]int
}

func newRig() *rig {
	c := clock.NewFake(start)
	bus := events.NewBus(0, nil)
	return &rig{clock: c, store: memstore.New(c), bus: bus, sub: bus.Subscribe(10000, nil), outcome: map[string]int{}}
}

func (r *rig) scheduler(t *testing.T, tg Target, ss ...Schedule) *Scheduler {
	t.Helper()
	s := New(Options{Store: r.store, Clock: r.clock, Events: r.bus})
	if err := s.Add("a", tg, ss); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// outcomes tallies the schedule-run events published so far.
func (r *rig) outcomes() map[string]int {
	for {
		select {
		case e := <-r.sub.C:
			r.outcome[e.Data["outcome"].(string)]++
		default:
			return r.outcome
		}
	}
}

func every(name, spec, overlap string) Schedule {
	return Schedule{Name: name, Cron: spec, Overlap: overlap, Enabled: true, Prompt: "check the queue"}
}

func TestFireDeliversDuePromptAndName(t *testing.T) {
	t.Parallel()
	r := newRig()
	tg := &target{}
	s := r.scheduler(t, tg, every("q", "*/10 * * * *", ""))
	if next := s.Next("a", "q"); !next.Equal(start.Add(10 * time.Minute)) {
		t.Fatalf("Next = %v", next)
	}
	r.clock.Advance(30 * time.Minute)
	if tg.count() != 3 {
		t.Fatalf("%d fires in 30 minutes of */10, want 3", tg.count())
	}
	f := tg.fires[1]
	if f.Kind != KindSchedule || f.Schedule != "q" || !f.Due.Equal(start.Add(20*time.Minute)) || f.Prompt != "check the queue" {
		t.Fatalf("fire = %+v", f)
	}
	if got := r.outcomes()[OutcomeFired]; got != 3 {
		t.Fatalf("fired outcomes = %d", got)
	}
}

func TestOverlapPolicies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		overlap                    string
		fires, skipped, interrupts int
	}{
		// A turn runs across three ticks of a 1-minute schedule.
		{OverlapSkip, 0, 3, 0},
		{OverlapQueue, 1, 2, 0},   // one waits for the turn; the others are dropped
		{OverlapReplace, 3, 0, 3}, // each tick interrupts the running turn
	} {
		t.Run(tc.overlap, func(t *testing.T) {
			t.Parallel()
			r := newRig()
			tg := &target{}
			r.scheduler(t, tg, every("q", "* * * * *", tc.overlap))
			tg.set(true, "")
			r.clock.Advance(3 * time.Minute)
			o := r.outcomes()
			if tg.count() != tc.fires || o[OutcomeSkippedOverlap] != tc.skipped || tg.interrupted != tc.interrupts {
				t.Fatalf("fires %d skipped %d interrupts %d; want %d %d %d", tg.count(), o[OutcomeSkippedOverlap], tg.interrupted, tc.fires, tc.skipped, tc.interrupts)
			}
			tg.set(false, "")
			r.clock.Advance(time.Minute)
			if tg.count() != tc.fires+1 {
				t.Fatalf("after the turn: %d fires, want %d", tg.count(), tc.fires+1)
			}
		})
	}
}

func TestDowntimeIsCountedAsMissedNotBackfilled(t *testing.T) {
	t.Parallel()
	r := newRig()
	tg := &target{}
	s := r.scheduler(t, tg, every("q", "*/10 * * * *", ""))
	r.clock.Advance(10 * time.Minute) // fires 08:10
	s.Stop()                          // the worker goes down
	r.clock.Advance(35 * time.Minute) // 08:20, 08:30, 08:40 pass unseen
	tg2 := &target{}
	s2 := r.scheduler(t, tg2, every("q", "*/10 * * * *", ""))
	if got := r.outcomes()[OutcomeMissed]; got != 3 {
		t.Fatalf("missed = %d, want 3 (one per tick)", got)
	}
	if tg2.count() != 0 {
		t.Fatalf("%d ticks backfilled", tg2.count())
	}
	if next := s2.Next("a", "q"); !next.Equal(start.Add(50 * time.Minute)) {
		t.Fatalf("next = %v, want 08:50 (on schedule)", next)
	}
	r.clock.Advance(5 * time.Minute)
	if tg2.count() != 1 || !tg2.fires[0].Due.Equal(start.Add(50*time.Minute)) {
		t.Fatalf("fires after restart: %+v", tg2.fires)
	}
}

func TestPausedTicksAreSkippedAndNotReplayed(t *testing.T) {
	t.Parallel()
	r := newRig()
	tg := &target{}
	r.scheduler(t, tg, every("q", "* * * * *", ""))
	tg.set(false, "paused")
	r.clock.Advance(3 * time.Minute)
	tg.set(false, "halted")
	r.clock.Advance(time.Minute)
	o := r.outcomes()
	if tg.count() != 0 || o[OutcomeSkippedPaused] != 3 || o[OutcomeSkippedHalted] != 1 {
		t.Fatalf("fires %d, outcomes %v", tg.count(), o)
	}
	tg.set(false, "") // resumed
	if tg.count() != 0 {
		t.Fatal("resume replayed skipped ticks")
	}
	r.clock.Advance(time.Minute)
	if tg.count() != 1 {
		t.Fatalf("%d fires after resume, want 1", tg.count())
	}
}

func TestTwoSchedulersSharingAStoreFireEachTickOnce(t *testing.T) {
	t.Parallel()
	r := newRig()
	t1, t2 := &target{}, &target{}
	r.scheduler(t, t1, every("q", "* * * * *", ""))
	r.scheduler(t, t2, every("q", "* * * * *", ""))
	r.clock.Advance(10 * time.Minute)
	if total := t1.count() + t2.count(); total != 10 {
		t.Fatalf("fires %d + %d = %d, want 10 (each tick once)", t1.count(), t2.count(), total)
	}
	if got := r.outcomes()[OutcomeFired]; got != 10 {
		t.Fatalf("fired outcomes %d, want 10", got)
	}
}

func TestTimerSurvivesRestartAndFiresAtItsTime(t *testing.T) {
	t.Parallel()
	r := newRig()
	tg := &target{}
	s := r.scheduler(t, tg)
	s.SetTimer("a", start.Add(10*time.Minute), false)
	s.SetTimer("a", start.Add(20*time.Minute), false) // replaces
	s.Stop()
	tg2 := &target{}
	s2 := r.scheduler(t, tg2)
	if at, hb, ok := s2.NextTimer("a"); !ok || hb || !at.Equal(start.Add(20*time.Minute)) {
		t.Fatalf("restored timer %v %v %v", at, hb, ok)
	}
	r.clock.Advance(19 * time.Minute)
	if tg2.count() != 0 {
		t.Fatal("timer fired early (the replaced one?)")
	}
	r.clock.Advance(time.Minute)
	if tg2.count() != 1 || tg2.fires[0].Kind != KindTimer || !tg2.fires[0].Due.Equal(start.Add(20*time.Minute)) {
		t.Fatalf("fires %+v", tg2.fires)
	}
	if _, _, ok := s2.NextTimer("a"); ok {
		t.Fatal("served timer still pending")
	}
	s2.Stop()
	s3 := r.scheduler(t, &target{})
	if _, _, ok := s3.NextTimer("a"); ok {
		t.Fatal("served timer restored again after another restart")
	}
}

func TestOverdueTimerFiresAtOnceAfterRestart(t *testing.T) {
	t.Parallel()
	r := newRig()
	s := r.scheduler(t, &target{})
	s.SetTimer("a", start.Add(time.Minute), false)
	s.Stop()
	r.clock.Advance(time.Hour) // down across the wake
	tg := &target{}
	r.scheduler(t, tg)
	r.clock.Advance(0)
	if tg.count() != 1 {
		t.Fatalf("overdue timer fires %d", tg.count())
	}
}

func TestLateTimerFiresOnlyTheLatestTick(t *testing.T) {
	t.Parallel()
	r := newRig()
	tg := &target{}
	s := New(Options{Store: r.store, Clock: r.clock, Events: r.bus})
	_ = s.Add("a", tg, []Schedule{every("q", "* * * * *", "")})
	e := s.agents["a"].schedules[0]
	// The process stalled: the 08:01 timer runs at 08:03:30.
	r.clock.Set(start.Add(3*time.Minute + 30*time.Second))
	s.tick(e, start.Add(time.Minute))
	t.Cleanup(s.Stop)
	o := r.outcomes()
	if tg.count() != 1 || !tg.fires[0].Due.Equal(start.Add(3*time.Minute)) || o[OutcomeMissed] != 2 {
		t.Fatalf("fires %+v, outcomes %v", tg.fires, o)
	}
}

func TestRunNowAndFrequentScheduleWarning(t *testing.T) {
	t.Parallel()
	r := newRig()
	tg := &target{}
	var logs strings.Builder
	s := New(Options{Store: r.store, Clock: r.clock, Log: newTextLogger(&logs)})
	if err := s.Add("a", tg, []Schedule{every("fast", "*/10 * * * * *", ""), {Name: "off", Cron: "@daily", Enabled: false}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "more often than once a minute") || !strings.Contains(logs.String(), "schedule=fast") {
		t.Fatalf("no warning for a sub-minute schedule:\n%s", logs.String())
	}
	if err := s.RunNow("a", "fast"); err != nil || tg.count() != 1 {
		t.Fatalf("RunNow: %v, fires %d", err, tg.count())
	}
	if err := s.RunNow("a", "off"); err == nil {
		t.Fatal("RunNow of a disabled schedule succeeded")
	}
	tg.set(false, "paused")
	if err := s.RunNow("a", "fast"); err == nil || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("RunNow on a paused agent: %v", err)
	}
	if err := s.Add("b", tg, []Schedule{every("bad", "*/61 * * * * * *", "")}); err == nil {
		t.Fatal("bad cron accepted")
	}
	_ = fmt.Sprint()
}

func TestTimezoneNamesTheSchedulesZone(t *testing.T) {
	t.Parallel()
	r := newRig()
	berlin := every("morning", "0 8 * * *", "")
	berlin.Timezone = "Europe/Berlin"
	s := r.scheduler(t, &target{}, berlin, every("q", "*/10 * * * *", ""))
	if got := s.Timezone("a", "morning"); got != "Europe/Berlin" {
		t.Fatalf("Timezone = %q", got)
	}
	if got := s.Timezone("a", "q"); got != "" {
		t.Fatalf("Timezone of a schedule without one = %q", got)
	}
	if got := s.Timezone("a", "nope"); got != "" {
		t.Fatalf("Timezone of an unknown schedule = %q", got)
	}
}
