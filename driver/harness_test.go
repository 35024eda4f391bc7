package driver

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/models/scripted"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// deadline bounds every wait in these tests. It is a failure guard, not a
// sleep: waits return as soon as what they wait for happens.
const deadline = 20 * time.Second

var epoch = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

// harness runs one agent on a fake clock with a scripted model whose
// calls the test can observe and hold.
type harness struct {
	t     *testing.T
	clock *clock.Fake
	d     *Driver
	a     *Agent
	sub   *events.Subscription
	seen  []events.Event

	mu       sync.Mutex
	requests []*model.LLMRequest
	calls    chan int      // receives each call number as it starts
	hold     chan struct{} // when non-nil, calls block until it is closed
	fail     []error       // the next calls fail with these, in order
}

type opt func(*Spec)

func newHarness(t *testing.T, script []config.ScriptStep, opts ...opt) *harness {
	t.Helper()
	return newHarnessWith(t, script, nil, opts...)
}

// newHarnessWith is newHarness with the driver's Deps adjusted by deps
// (which may wrap Store, set Health, ...).
func newHarnessWith(t *testing.T, script []config.ScriptStep, deps func(*Deps), opts ...opt) *harness {
	t.Helper()
	h := &harness{t: t, clock: clock.NewFake(epoch), calls: make(chan int, 100)}
	m, err := scripted.New("fake", config.Model{Provider: "scripted", Script: script, Loop: true},
		scripted.WithHook(h.hook))
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{
		Name:         "tester",
		Instruction:  "You are a test agent.",
		Model:        m,
		Tools:        []string{"schedule_next_turn", "report_done"},
		HistoryTurns: 20,
	}
	spec.Sleep.Max = 24 * time.Hour
	for _, o := range opts {
		o(&spec)
	}
	bus := events.NewBus(4096, nil)
	h.sub = bus.Subscribe(4096, nil)
	d := Deps{Clock: h.clock, Store: memstore.New(h.clock), Events: bus}
	if deps != nil {
		deps(&d)
	}
	h.d, err = New(d, []Spec{spec})
	if err != nil {
		t.Fatal(err)
	}
	h.a, _ = h.d.Agent("tester")
	ctx, cancel := context.WithCancel(context.Background())
	if err := h.d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.release()
		h.d.Shutdown(context.Background())
		cancel()
	})
	return h
}

func (h *harness) hook(ctx context.Context, req *model.LLMRequest, call int) error {
	h.mu.Lock()
	h.requests = append(h.requests, req)
	hold := h.hold
	var fail error
	if len(h.fail) > 0 {
		fail, h.fail = h.fail[0], h.fail[1:]
	}
	h.mu.Unlock()
	if fail != nil {
		h.calls <- call
		return fail
	}
	h.calls <- call
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// failCalls makes the next model calls fail with errs, one each.
func (h *harness) failCalls(errs ...error) {
	h.mu.Lock()
	h.fail = append(h.fail, errs...)
	h.mu.Unlock()
}

// modelCalls returns how many model calls were made.
func (h *harness) modelCalls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.requests)
}

// holdCalls makes model calls block until release.
func (h *harness) holdCalls() {
	h.mu.Lock()
	h.hold = make(chan struct{})
	h.mu.Unlock()
}

// step lets the held call go on and holds the next one.
func (h *harness) step() {
	h.mu.Lock()
	old := h.hold
	h.hold = make(chan struct{})
	h.mu.Unlock()
	if old != nil {
		close(old)
	}
}

func (h *harness) release() {
	h.mu.Lock()
	if h.hold != nil {
		close(h.hold)
		h.hold = nil
	}
	h.mu.Unlock()
}

func (h *harness) waitCall() int {
	h.t.Helper()
	select {
	case n := <-h.calls:
		return n
	case <-time.After(deadline):
		h.t.Fatal("no model call")
		return 0
	}
}

// request returns the text of the newest user prompt in model call n
// (1-based).
func (h *harness) prompt(n int) string {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if n > len(h.requests) {
		h.t.Fatalf("model call %d not made (%d calls)", n, len(h.requests))
	}
	req := h.requests[n-1]
	for i := len(req.Contents) - 1; i >= 0; i-- {
		c := req.Contents[i]
		if c.Role == genai.RoleUser && len(c.Parts) > 0 && c.Parts[0].Text != "" {
			return c.Parts[0].Text
		}
	}
	return ""
}

// waitEvent returns the next event of type typ (skipping others), keeping
// everything it reads in h.seen.
func (h *harness) waitEvent(typ string) events.Event {
	h.t.Helper()
	timeout := time.After(deadline)
	for {
		select {
		case e := <-h.sub.C:
			h.seen = append(h.seen, e)
			if e.Type == typ {
				return e
			}
		case <-timeout:
			h.t.Fatalf("no %s event; saw %v", typ, types(h.seen))
			return events.Event{}
		}
	}
}

// drainEvents reads every event already published.
func (h *harness) drainEvents() {
	for {
		select {
		case e := <-h.sub.C:
			h.seen = append(h.seen, e)
		default:
			return
		}
	}
}

func (h *harness) count(typ string) int {
	h.drainEvents()
	n := 0
	for _, e := range h.seen {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func types(es []events.Event) string {
	var s []string
	for _, e := range es {
		s = append(s, e.Type)
	}
	return strings.Join(s, ",")
}

// waitIdle waits until the agent's loop is back asleep with nothing to do.
func (h *harness) waitIdle() { h.t.Helper(); h.waitSettled(true) }

// waitSettled waits until no turn runs and the loop has consumed every
// signal; with empty, also until no wake is pending.
func (h *harness) waitSettled(empty bool) {
	h.t.Helper()
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		s := h.a.Status()
		if s.State != Running && (!empty || s.PendingWakes == 0) && len(h.a.signal) == 0 {
			return
		}
		<-time.After(time.Millisecond)
	}
	h.t.Fatalf("agent never idle: %+v", h.a.Status())
}

func text(s string) config.ScriptStep {
	return config.ScriptStep{Text: s, Usage: config.Usage{Input: 100, Output: 10}}
}

func call(name string, args map[string]any) config.ScriptStep {
	return config.ScriptStep{Call: &config.Call{Name: name, Args: args}, Usage: config.Usage{Input: 100, Output: 5}}
}

func wakeMsg(text string) inbox.Message {
	return inbox.Message{Kind: inbox.Wake, Text: text, Source: "test"}
}

func deferredMsg(text string) inbox.Message {
	return inbox.Message{Kind: inbox.Deferred, Text: text, Source: "test"}
}
