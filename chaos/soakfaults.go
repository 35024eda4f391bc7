package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// firedFault is a fault the soak caused: when (since the load began), how
// long until it was cleared, and what happened that the plan could not
// say.
type firedFault struct {
	fault
	At, Took time.Duration
	Note     string
	// Recovery runs from Cleared to the first completed turn of one of
	// Agents (any agent when none), or for a burst until the last of its
	// IDs was handled; it is rendered once the logs are read.
	Cleared  time.Time
	Agents   []string
	IDs      []string
	Recovery string
	// gapBefore is the spend in the store less what the provider billed,
	// just before the fault (when known): the change from one fault's to
	// the next one's (or the end's) is the share of the difference its
	// period made.
	gapBefore float64
	gapKnown  bool
	SpendGap  string
}

// recovery renders how long f took to recover, per l: to the first turn
// of its agents after it was cleared ("-" when it never was), or to the
// last of a burst's messages handled.
func (f firedFault) recovery(l *Ledger) string {
	switch {
	case f.Cleared.IsZero():
		return "-"
	case len(f.IDs) > 0:
		at, ok := l.HandledAll(f.IDs)
		if !ok {
			return "not all handled"
		}
		return "all handled after " + secs(at.Sub(f.Cleared))
	}
	c, ok := l.FirstCompletion(f.Cleared, f.Agents, "")
	if !ok {
		return "no turn after it"
	}
	return secs(c.Time.Sub(f.Cleared))
}

// spendGap returns the agents' spend in the store less what the provider
// billed so far, if the store's spend could be read.
func (s *soak) spendGap() (float64, bool) {
	stored, err := s.storedSpend()
	if err != nil {
		return 0, false
	}
	var c spendCheck
	c.First, c.Second, _ = s.prov.Answered()
	return stored - c.Billed(), true
}

// Bounds of the operator verbs a pause fault sends: a verb may fail while
// the agent changes owner, and is sent again.
const (
	pauseWithin  = 30 * time.Second
	resumeWithin = 60 * time.Second
)

// inflictAll causes faults, each after its calm, until the soak's
// duration has passed: a fault whose calm would end past it is not
// caused. A fault that began in time runs to its end.
func (s *soak) inflictAll() error {
	pick := newFaultPicker(s.set.Seed, s.set.Store, s.holders(), s.agents)
	end := s.began.Add(s.set.Duration)
	for {
		f := pick.next()
		if time.Now().Add(f.Gap).After(end) {
			return s.calm(time.Until(end))
		}
		if err := s.calm(f.Gap); err != nil {
			return err
		}
		ff := firedFault{fault: f}
		ff.gapBefore, ff.gapKnown = s.spendGap()
		at := time.Since(s.began)
		ff.At = at
		fmt.Fprintf(os.Stderr, "soak: %s %s ...\n", clock(at), f)
		start := time.Now()
		err := s.inflict(f, &ff)
		ff.Took = time.Since(start)
		s.fired = append(s.fired, ff)
		if err != nil {
			return fmt.Errorf("fault %d at %s (%s): %w", len(s.fired), clock(at), f, err)
		}
		s.progress()
	}
}

// inflict causes f and clears it; ff.Note says what it met, and ff's
// Cleared, Agents and IDs where its recovery is measured.
func (s *soak) inflict(f fault, ff *firedFault) error {
	switch f.Kind {
	case faultKill, faultTerm:
		r := s.replica(f.Replica)
		ff.Agents = s.watch.held(f.Replica)
		ff.Note = fmt.Sprintf("it held %d agents", len(ff.Agents))
		ff.Cleared = time.Now() // its agents move from now on
		if f.Kind == faultKill {
			if err := r.svc.kill(); err != nil {
				return err
			}
		} else if err := r.svc.stop(15 * time.Second); err == nil {
			ff.Note += fmt.Sprintf("; exited %s after SIGTERM", secs(time.Since(ff.Cleared)))
		} else {
			ff.Note += "; did not exit within 15 s of SIGTERM (shutdown_grace 5s): killed"
			s.broken("%s did not exit within 15 s of SIGTERM (shutdown_grace 5s): %v", f.Replica, err)
		}
		if err := sleep(s.ctx, f.For); err != nil {
			return err
		}
		if err := s.start(r.svc); err != nil {
			return err
		}
		r.restarted()
	case faultStop:
		r := s.replica(f.Replica)
		ff.Agents = s.watch.held(f.Replica)
		ff.Note = fmt.Sprintf("it held %d agents", len(ff.Agents))
		ff.Cleared = time.Now() // its agents move from now on
		r.svc.p.signal(syscall.SIGSTOP)
		err := sleep(s.ctx, f.For)
		r.svc.p.signal(syscall.SIGCONT)
		return err
	case faultStarve:
		r := s.replica(f.Replica)
		ff.Agents = s.watch.held(f.Replica)
		q, err := newCPUQuota(fmt.Sprintf("agent-worker-soak-%d-%s", os.Getpid(), f.Replica), starvedShare)
		if err != nil {
			return err
		}
		if err := q.add(r.svc.p.cmd.Process.Pid); err != nil {
			_ = q.remove()
			return err
		}
		ff.Cleared = time.Now()
		err = sleep(s.ctx, f.For)
		ff.Note = fmt.Sprintf("it held %d agents; %s", len(ff.Agents), q.throttled())
		return errors.Join(err, q.release(r.svc.p.cmd.Process.Pid), q.remove())
	case faultNATS, faultRedis:
		svc := s.ns
		if f.Kind == faultRedis {
			svc = s.rs
		}
		var err error
		if f.Kind == faultNATS {
			err = svc.kill()
		} else {
			err = svc.stop(15 * time.Second)
		}
		if err != nil {
			return err
		}
		if err := sleep(s.ctx, f.For); err != nil {
			return err
		}
		ff.Cleared = time.Now()
		return s.start(svc)
	case faultProvider:
		_, _, before := s.prov.Answered()
		s.prov.Fail(f.Status)
		err := sleep(s.ctx, f.For)
		s.prov.Fail(0)
		ff.Cleared = time.Now()
		_, _, after := s.prov.Answered()
		ff.Note = fmt.Sprintf("%d requests refused", after-before)
		return err
	case faultPause:
		ff.Agents = []string{f.Agent}
		return s.pauseFor(f.Agent, f.For, ff)
	case faultBurst:
		ff.Cleared = time.Now()
		for range burstMessages {
			id, err := s.send(kindBurst, message{agent: f.Agent})
			if err != nil {
				return err
			}
			ff.IDs = append(ff.IDs, id)
		}
		ff.Note = fmt.Sprintf("acked in %s", secs(time.Since(ff.Cleared)))
	}
	return nil
}

// pauseFor pauses agent over the API, waits d, and resumes it. An agent
// whose resume does not go through within resumeWithin stays in s.paused
// for clearFaults.
func (s *soak) pauseFor(agent string, d time.Duration, ff *firedFault) error {
	s.paused[agent] = true // a pause that timed out may still have landed
	tries, err := s.verb(agent, "pause", pauseWithin)
	if err != nil {
		ff.Note = fmt.Sprintf("pause not taken within %v (%d tries): %v", pauseWithin, tries, err)
		return nil
	}
	if tries > 1 {
		ff.Note = fmt.Sprintf("paused at try %d; ", tries)
	}
	if err := sleep(s.ctx, d); err != nil {
		return err
	}
	ff.Cleared = time.Now()
	tries, err = s.verb(agent, "resume", resumeWithin)
	switch {
	case err != nil:
		ff.Note += fmt.Sprintf("resume not taken within %v (%d tries): %v", resumeWithin, tries, err)
	case tries > 1:
		delete(s.paused, agent)
		ff.Note += fmt.Sprintf("resumed at try %d", tries)
	default:
		delete(s.paused, agent)
	}
	return nil
}

// verb posts an operator verb for agent to the running replicas in turn
// until one takes it or within passes; it returns how many tries it took.
func (s *soak) verb(agent, verb string, within time.Duration) (int, error) {
	tries := 0
	var last error
	err := poll(s.ctx, within, 500*time.Millisecond, verb+" of "+agent, func() (bool, error) {
		for _, r := range s.reps {
			if !r.svc.running() {
				continue
			}
			tries++
			if last = r.svc.verb(s.ctx, agent, verb); last == nil || (verb == "resume" && notPaused(last)) {
				// A resume whose answer was lost and is asked again finds
				// the agent open: a 409 "not paused", nothing left to do.
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil && last != nil {
		err = fmt.Errorf("%w (last: %v)", err, last)
	}
	return tries, err
}

// notPaused reports whether err is the API's 409 for a resume of an agent
// that is not paused (driver.ErrNotPaused).
func notPaused(err error) bool {
	return strings.Contains(err.Error(), "HTTP 409") && strings.Contains(err.Error(), " is not paused (state ")
}

// clearFaults makes sure no fault outlives the soak's duration: the
// provider answers, no agent is left paused. (Processes are restarted by
// the fault that stopped them.)
func (s *soak) clearFaults() error {
	if s.prov != nil {
		s.prov.Fail(0)
	}
	for _, a := range slices.Sorted(maps.Keys(s.paused)) {
		if _, err := s.verb(a, "resume", resumeWithin); err != nil {
			return fmt.Errorf("the agent %s left paused by a fault: %w", a, err)
		}
		delete(s.paused, a)
	}
	return nil
}

// calm waits d, reading the workers' logs every few seconds so that the
// end of the soak does not read ten minutes of them at once.
func (s *soak) calm(d time.Duration) error {
	end := time.Now().Add(d)
	for {
		left := time.Until(end)
		if left <= 0 {
			return nil
		}
		if err := sleep(s.ctx, min(left, 5*time.Second)); err != nil {
			return err
		}
		if err := s.tail.Poll(); err != nil {
			return err
		}
	}
}

// progress prints how far the soak got: the deliveries owed and the ones
// not accounted for yet.
func (s *soak) progress() {
	_ = s.tail.Poll()
	s.mu.Lock()
	owed := len(s.owe.deliveries())
	left := len(s.led.UnaccountedFor(s.owe))
	s.mu.Unlock()
	fmt.Fprintf(os.Stderr, "soak: %s %d deliveries owed, %d not yet handled\n", clock(time.Since(s.began)), owed, left)
}

// clock renders a duration since the soak's start: "03:07".
func clock(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%02d:%02d", int(d/time.Minute), int(d%time.Minute/time.Second))
}
