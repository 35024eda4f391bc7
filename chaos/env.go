package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agent-worker/agent-worker/internal/textclip"
)

// Result is what one scenario did and found.
type Result struct {
	N           int // the scenario's number
	Name, Title string
	Story       []string // what was done, in plain words, sentence by sentence
	Count       Count
	// Pending is how many messages the workers still held (inbox plus
	// deferred, per their API) when the drain deadline passed with
	// messages unaccounted; -1 when not asked or not known.
	Pending  int
	Recovery string
	Notes    []string
	// Broken lists the promises of the scenario's story that did not
	// hold, beyond the message counts (for example, a side effect made
	// twice).
	Broken  []string
	Err     error // the harness could not run the scenario to its end
	Elapsed time.Duration
}

// Failed reports whether the scenario shows a lost, double-handled or
// dead-lettered message (all messages the harness sends are valid), or
// could not be run.
func (r *Result) Failed() bool {
	return r.Err != nil || r.Count.Lost > 0 || r.Count.Twice > 0 || r.Count.Dead > 0 || len(r.Broken) > 0
}

// harness holds what every scenario shares.
type harness struct {
	bin, natsBin, redisBin string
	reaper                 *reaper
	root                   string // temp directory of this run
	timeout                time.Duration
}

// env is one scenario's world: its directory, processes, publisher and
// ledger.
type env struct {
	ctx        context.Context
	h          *harness
	prefix     string // of every message id: s1, s2, ...
	dir        string
	res        *Result
	led        *Ledger
	tail       *Tail
	pub        *publisher
	services   []*service // in start order
	recoveries []recovery
	// owe, when set, is what the scenario owes per (agent, id): a message
	// on a subject two agents bind is owed to each. Unset: each published
	// id once, to its agent. oweMu guards it while a load writes it.
	owe   owed
	oweMu sync.Mutex
}

// recovery is a fault cleared at a moment; recovered once one of agents
// completes a turn on source ("" any) after it.
type recovery struct {
	cleared time.Time
	agents  []string
	source  string
}

// run runs one scenario in a fresh directory and accounts for its
// messages, whatever the scenario returned. Every process it started is
// stopped before run returns.
func (h *harness) run(ctx context.Context, s scenario, n int) *Result {
	res := &Result{N: n, Name: s.name, Title: s.title, Pending: -1}
	start := time.Now()
	timeout := max(h.timeout, s.timeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	e := &env{ctx: ctx, h: h, prefix: fmt.Sprintf("s%d", n), res: res, led: NewLedger()}
	e.tail = NewTail(e.led)
	dir, err := os.MkdirTemp(h.root, s.name+"-")
	if err != nil {
		res.Err = err
		return res
	}
	e.dir = dir
	err = s.run(e)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && err != nil {
		err = fmt.Errorf("scenario deadline of %v passed: %w", timeout, err)
	}
	res.Err = errors.Join(err, e.finish())
	res.Elapsed = time.Since(start)
	return res
}

// worker adds a worker replica named holder (the lease holder, the same
// across its restarts) to the scenario; it is not started.
func (e *env) worker(holder string, c workerConf) (*service, error) {
	c.holder = holder
	s, err := newWorker(e.h.bin, filepath.Join(e.dir, holder), c)
	if err != nil {
		return nil, err
	}
	e.tail.Add(s.log, holder)
	e.services = append(e.services, s)
	return s, nil
}

// nats adds an external nats-server to the scenario and starts it.
func (e *env) nats() (*service, string, error) {
	s, url, err := newNATS(e.h.natsBin, e.dir)
	if err == nil {
		e.services = append(e.services, s)
		err = e.start(s)
	}
	return s, url, err
}

// redis adds a redis-server to the scenario and starts it.
func (e *env) redis() (*service, string, error) {
	s, url, err := newRedis(e.h.redisBin, e.dir)
	if err == nil {
		e.services = append(e.services, s)
		err = e.start(s)
	}
	return s, url, err
}

// start starts s and waits until it is ready.
func (e *env) start(s *service) error { return s.start(e.ctx, e.h.reaper) }

// connect makes the scenario's publisher.
func (e *env) connect(url string) error {
	p, err := newPublisher(url, e.prefix)
	e.pub = p
	return err
}

// story adds a sentence to what the scenario did.
func (e *env) story(format string, args ...any) {
	e.res.Story = append(e.res.Story, fmt.Sprintf(format, args...))
}

// broken records a promise of the scenario that did not hold: the
// scenario fails.
func (e *env) broken(format string, args ...any) {
	e.res.Broken = append(e.res.Broken, fmt.Sprintf(format, args...))
}

// note adds a remark to the scenario's row.
func (e *env) note(format string, args ...any) {
	e.res.Notes = append(e.res.Notes, fmt.Sprintf(format, args...))
}

// cleared records that a fault ended at t for agents, whose next
// completed turn (on source, "" any) marks recovery.
func (e *env) cleared(t time.Time, agents []string, source string) {
	e.recoveries = append(e.recoveries, recovery{cleared: t, agents: agents, source: source})
}

// published returns the ids acked so far.
func (e *env) published() []string {
	if e.pub == nil {
		return nil
	}
	return e.pub.ids()
}

// wait waits for a background publisher to finish.
func (e *env) wait(done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-e.ctx.Done():
		return context.Cause(e.ctx)
	}
}

// loadUntil publishes in the background, round-robin to agents, one
// message every interval, until the returned function is called; that
// stops it and waits until the message being published then is acked.
// Calling it again returns nil at once.
func (e *env) loadUntil(interval time.Duration, agents []string) (stop func() error) {
	halt := make(chan struct{})
	return e.stopper(halt, e.pub.until(e.ctx, halt, interval, agents))
}

// stopper returns the function that stops a background publisher: it
// closes halt and waits for done's answer. Calling it again returns nil
// at once.
func (e *env) stopper(halt chan struct{}, done <-chan error) (stop func() error) {
	var once sync.Once
	return func() error {
		var err error
		once.Do(func() {
			close(halt)
			err = e.wait(done)
		})
		return err
	}
}

// latency is how long one message waited: from its publish (JetStream's
// ack, harness clock) to the first completed turn naming it (worker log
// clock; same host).
type latency struct {
	id, agent string
	took      time.Duration
}

// slowest returns the message acked in [from, to) that waited longest to
// be handled, and how many of those messages were handled.
func (e *env) slowest(from, to time.Time) (latency, int) {
	var worst latency
	n := 0
	for _, id := range e.published() {
		s, ok := e.pub.sentAt(id)
		if !ok || s.at.Before(from) || !s.at.Before(to) {
			continue
		}
		at, ok := e.led.HandledAt(id)
		if !ok {
			continue
		}
		n++
		if d := at.Sub(s.at); n == 1 || d > worst.took {
			worst = latency{id: id, agent: s.agent, took: d}
		}
	}
	return worst, n
}

// drain waits until every published message is handled or dead-lettered,
// or timeout passes; then, if some are not, it asks the workers' APIs how
// many messages they still hold. Unaccounted messages are not an error
// here: they are counted as lost.
func (e *env) drain(timeout time.Duration, agents []string) error {
	start := time.Now()
	err := poll(e.ctx, timeout, 100*time.Millisecond, "every message to be handled", func() (bool, error) {
		if err := e.tail.Poll(); err != nil {
			return false, err
		}
		return e.unaccounted() == 0, nil
	})
	if err == nil {
		e.note("drained %s after the last publish", secs(time.Since(start)))
		return nil
	}
	if e.ctx.Err() != nil {
		return err
	}
	e.note("%d message(s) unaccounted %v after the last publish", e.unaccounted(), timeout)
	e.askPending(agents)
	return nil
}

// unaccounted counts what the scenario owes that is neither handled nor
// dead-lettered.
func (e *env) unaccounted() int {
	e.oweMu.Lock()
	defer e.oweMu.Unlock()
	if e.owe != nil {
		return len(e.led.UnaccountedFor(e.owe))
	}
	return e.led.Unaccounted(e.published())
}

// askPending asks the API how many messages each of agents still holds,
// notes each answer and sets the result's Pending to their sum (when any
// replica answered).
func (e *env) askPending(agents []string) {
	// Every replica answers with the agent's owner's view: ask each agent
	// of the first replica that answers.
	pending, known := 0, false
	for _, a := range agents {
		for _, s := range e.services {
			if s.api == "" || !s.running() {
				continue
			}
			st, err := s.status(e.ctx, a)
			if err != nil {
				continue
			}
			pending += st.InboxPending + st.DeferredPending
			known = true
			e.note("API of %s then: %s %s (owner %s), inbox_pending %d, deferred_pending %d", s.name, a, st.State, st.Owner, st.InboxPending, st.DeferredPending)
			break
		}
	}
	if known {
		e.res.Pending = pending
	}
}

// finish stops the scenario's processes (workers first, gracefully),
// reads the last log lines and fills in the result.
func (e *env) finish() error {
	var errs []error
	for i := len(e.services) - 1; i >= 0; i-- {
		if err := e.services[i].stop(15 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if e.pub != nil {
		e.pub.close()
	}
	if err := e.tail.Poll(); err != nil {
		errs = append(errs, err)
	}
	e.oweMu.Lock()
	defer e.oweMu.Unlock()
	if e.owe != nil {
		e.res.Count = e.led.CountFor(e.owe)
	} else {
		e.res.Count = e.led.Count(e.published())
	}
	e.res.Recovery = e.recovery()
	if f := e.led.Failed(); len(f) > 0 {
		var parts []string
		for _, o := range f {
			parts = append(parts, fmt.Sprintf("%d %s (first: %q)", o.N, o.Outcome, textclip.Bytes(o.First, 200, "…")))
		}
		e.note("failed turns: %s", strings.Join(parts, ", "))
	}
	if t := e.led.Throttled(); len(t) > 0 {
		var parts []string
		for _, o := range t {
			parts = append(parts, fmt.Sprintf("%d %s", o.N, o.Outcome))
		}
		e.note("turns throttled: %s", strings.Join(parts, ", "))
	}
	if e.led.duplicates > 0 {
		e.note("%d redelivery(ies) recognised as handled", e.led.duplicates)
	}
	if e.res.Count.Dropped > 0 {
		e.note("%d of the lost were logged as \"message dropped\"", e.res.Count.Dropped)
	}
	if e.res.Count.Unknown > 0 {
		e.note("%d handled id(s) were never acked to the harness", e.res.Count.Unknown)
	}
	if e.led.malformed > 0 {
		e.note("%d stderr line(s) were not JSON, e.g. %q", e.led.malformed, e.led.example)
	}
	return errors.Join(errs...)
}

// recovery renders the recovery times: one, or the worst and the mean of
// several; "none" for a fault after which no turn completed.
func (e *env) recovery() string {
	if len(e.recoveries) == 0 {
		return "-"
	}
	var worst, sum time.Duration
	missing := 0
	for _, r := range e.recoveries {
		c, ok := e.led.FirstCompletion(r.cleared, r.agents, r.source)
		if !ok {
			missing++
			continue
		}
		d := c.Time.Sub(r.cleared)
		sum += d
		worst = max(worst, d)
	}
	n := len(e.recoveries) - missing
	var s string
	switch {
	case n == 0:
		return "none"
	case len(e.recoveries) == 1:
		s = secs(worst)
	default:
		s = fmt.Sprintf("max %s, mean %s (%d)", secs(worst), secs(sum/time.Duration(n)), n)
	}
	if missing > 0 {
		s += fmt.Sprintf(", %d never", missing)
	}
	return s
}

// secs renders d in seconds with one decimal.
func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
