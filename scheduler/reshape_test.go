package scheduler

import (
	"testing"
	"time"
)

// TestReplaceSchedules: a reload's new schedules replace the old ones on
// a new target — the old schedule never fires again, the new one fires
// by its spec, and the pending timer moves to the new target — and
// Remove disarms everything.
func TestReplaceSchedules(t *testing.T) {
	t.Parallel()
	r := newRig()
	old, next := &target{}, &target{}
	s := r.scheduler(t, old, every("q", "*/10 * * * *", ""))
	s.SetTimer("a", start.Add(45*time.Minute), false)
	r.clock.Advance(10 * time.Minute)
	if old.count() != 1 {
		t.Fatalf("%d fires before the replace, want 1", old.count())
	}
	if err := s.Replace("a", next, []Schedule{every("hourly", "0 * * * *", "")}); err != nil {
		t.Fatal(err)
	}
	if !s.Next("a", "q").IsZero() || !s.Next("a", "hourly").Equal(start.Add(time.Hour)) {
		t.Fatalf("next ticks after the replace: q %v, hourly %v", s.Next("a", "q"), s.Next("a", "hourly"))
	}
	r.clock.Advance(50 * time.Minute) // to 09:00: the timer at 08:45 and the hourly tick
	if old.count() != 1 {
		t.Fatalf("the replaced schedule fired %d more times", old.count()-1)
	}
	var kinds []Kind
	for _, f := range next.fires {
		kinds = append(kinds, f.Kind)
	}
	if len(kinds) != 2 || kinds[0] != KindTimer || kinds[1] != KindSchedule || next.fires[1].Schedule != "hourly" {
		t.Fatalf("fires of the new target: %+v", next.fires)
	}
	if err := s.Replace("a", next, []Schedule{{Name: "bad", Cron: "0 * * * *", Timezone: "Mars/Olympus", Enabled: true}}); err == nil {
		t.Fatal("a bad time zone was accepted")
	}
	if s.Next("a", "hourly").IsZero() {
		t.Fatal("a failed replace changed the schedules")
	}

	s.Remove("a")
	r.clock.Advance(3 * time.Hour)
	if next.count() != 2 {
		t.Fatalf("a removed agent's schedule fired %d more times", next.count()-2)
	}
}
