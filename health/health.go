// Package health tracks whether the worker's dependencies — NATS, the
// state store, JetStream storage — are usable, so turns wait through an
// outage instead of calling the model and failing, and /readyz answers at
// once from what is known. It probes; it must not decide what waits.
//
// Guarantees: Unavailable and Problems never block on a dependency: they
// read the last probe results. A probe that does not answer within
// Options.Timeout counts as a failure, and only one probe per check is in
// flight at a time, so a hung dependency neither piles up goroutines nor
// delays readers. Not guaranteed: a dependency that failed since the last
// probe reads as up until the next one (at most Options.Interval later, or
// at once after Failed).
package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/outage"
)

// Check is one dependency and how to probe it.
type Check struct {
	// Name is the dependency as operators read it: "nats", "store",
	// "jetstream storage".
	Name string
	// Probe returns nil when the dependency is usable. It should honour
	// ctx; one that does not is reported down after Options.Timeout all
	// the same.
	Probe func(ctx context.Context) error
}

// Options configure a Monitor.
type Options struct {
	Clock clock.Clock  // default clock.Real()
	Log   *slog.Logger // default: discard
	// Interval between probe rounds. Default 1s.
	Interval time.Duration
	// Timeout bounds one probe. Default 400ms.
	Timeout time.Duration
}

// Status is one dependency's last known state.
type Status struct {
	Name string
	// Err is why it is unusable; nil when it is up.
	Err error
	// Since is when it entered this state.
	Since time.Time
}

// Monitor probes its checks every Interval and on demand.
type Monitor struct {
	o        Options
	checks   []*check
	mu       sync.Mutex
	onChange []func(up bool)
	timer    clock.Timer
	started  bool
	stopped  bool
	down     bool // some check is down
}

type check struct {
	Check
	err      error
	since    time.Time
	inflight bool
	began    time.Time // when the probe in flight started
}

// ErrProbeTimeout is the failure recorded for a probe that did not answer
// within Options.Timeout.
var ErrProbeTimeout = errors.New("did not answer in time")

// New returns a Monitor over checks; call Start.
func New(o Options, checks ...Check) *Monitor {
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 400 * time.Millisecond
	}
	m := &Monitor{o: o}
	now := o.Clock.Now()
	for _, c := range checks {
		m.checks = append(m.checks, &check{Check: c, since: now})
	}
	return m
}

// OnChange registers f to be told, on its own goroutine, each time the
// dependencies as a whole go down (false) or are all up again (true).
// Register before Start.
func (m *Monitor) OnChange(f func(up bool)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onChange = append(m.onChange, f)
}

// Start probes every check once, waiting for the answers at most Timeout,
// then keeps probing every Interval until Stop.
func (m *Monitor) Start() {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return
	}
	m.started = true
	m.mu.Unlock()
	var wg sync.WaitGroup
	m.round(&wg)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(m.o.Timeout):
	}
	m.arm()
}

func (m *Monitor) arm() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	m.timer = m.o.Clock.AfterFunc(m.o.Interval, func() {
		m.round(nil)
		m.arm()
	})
}

// Stop ends the probing. Probes in flight finish on their own.
func (m *Monitor) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = true
	if m.timer != nil {
		m.timer.Stop()
	}
}

// Failed tells the monitor a dependency failed in use (err, for the log):
// every check is probed again at once, without waiting for the next round.
func (m *Monitor) Failed(err error) {
	m.o.Log.Debug("dependency failure reported; probing now", "error", err)
	m.round(nil)
}

// round starts a probe of every check that has none in flight, and gives
// up on probes in flight longer than Timeout.
func (m *Monitor) round(wg *sync.WaitGroup) {
	now := m.o.Clock.Now()
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	var start []*check
	for _, c := range m.checks {
		if c.inflight {
			if time.Since(c.began) >= m.o.Timeout && !errors.Is(c.err, ErrProbeTimeout) {
				m.setLocked(c, fmt.Errorf("probe %w (%s)", ErrProbeTimeout, m.o.Timeout), now)
			}
			continue
		}
		c.inflight, c.began = true, time.Now()
		start = append(start, c)
	}
	m.mu.Unlock()
	m.notify()
	for _, c := range start {
		if wg != nil {
			wg.Add(1)
		}
		go func() {
			if wg != nil {
				defer wg.Done()
			}
			m.probe(c)
		}()
	}
}

// probe runs one check and records its answer, however late: a probe
// that answers after it was given up on is still the newest news.
func (m *Monitor) probe(c *check) {
	ctx, cancel := context.WithTimeout(context.Background(), m.o.Timeout)
	err := c.Probe(ctx)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	cancel()
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("probe %w (%s)", ErrProbeTimeout, m.o.Timeout)
	}
	m.mu.Lock()
	c.inflight = false
	m.setLocked(c, err, m.o.Clock.Now())
	m.mu.Unlock()
	m.notify()
}

// setLocked records a probe result, logging transitions. Callers hold mu.
func (m *Monitor) setLocked(c *check, err error, now time.Time) {
	wasUp := c.err == nil
	switch {
	case wasUp && err != nil:
		m.o.Log.Warn("dependency unavailable; turns wait until it is back", "dependency", c.Name, "error", err)
		c.since = now
	case !wasUp && err == nil:
		m.o.Log.Info("dependency available again", "dependency", c.Name, "was_down_for", now.Sub(c.since).Round(time.Millisecond))
		c.since = now
	case !wasUp && err.Error() != c.err.Error():
		m.o.Log.Warn("dependency still unavailable", "dependency", c.Name, "error", err)
	}
	c.err = err
}

// notify tells OnChange listeners when the overall state flipped.
func (m *Monitor) notify() {
	m.mu.Lock()
	down := false
	for _, c := range m.checks {
		if c.err != nil {
			down = true
		}
	}
	changed := down != m.down
	m.down = down
	fs := m.onChange
	m.mu.Unlock()
	if !changed {
		return
	}
	for _, f := range fs {
		go f(!down)
	}
}

// Unavailable returns why turns must wait — the first dependency that is
// down, marked as an outage (package outage) — or nil. It never blocks on
// a dependency.
func (m *Monitor) Unavailable() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.checks {
		if c.err != nil {
			return outage.Mark(c.Name, fmt.Errorf("%s: %w", c.Name, c.err))
		}
	}
	return nil
}

// Problems lists every dependency that is down, as "name: error", for
// /readyz. Empty when all are up. It never blocks on a dependency.
func (m *Monitor) Problems() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, c := range m.checks {
		if c.err != nil {
			out = append(out, c.Name+": "+c.err.Error())
		}
	}
	return out
}

// Statuses returns every check's last known state, in the order given to
// New.
func (m *Monitor) Statuses() []Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Status, 0, len(m.checks))
	for _, c := range m.checks {
		out = append(out, Status{Name: c.Name, Err: c.err, Since: c.since})
	}
	return out
}
