package driver

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/journal"
	"github.com/agent-worker/agent-worker/outage"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// publishLog is a tools.Publisher that remembers what was published and
// with which action id.
type publishLog struct {
	mu  sync.Mutex
	ids []string
}

func (p *publishLog) Publish(_ context.Context, subject string, data []byte, id string) error {
	p.mu.Lock()
	p.ids = append(p.ids, id)
	p.mu.Unlock()
	return nil
}

func (p *publishLog) published() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.ids...)
}

func publishing(st store.Store, pub *publishLog) func(*Deps) {
	return func(d *Deps) { d.Store, d.Publisher = st, pub }
}

// deps applies each of fs.
func deps(fs ...func(*Deps)) func(*Deps) {
	return func(d *Deps) {
		for _, f := range fs {
			f(d)
		}
	}
}

func withPublish(s *Spec) {
	s.Tools = append(s.Tools, "publish")
	s.Publish = []string{"ops.>"}
}

// A worker dies in the second model call of a turn whose first step
// published a report. The next process resumes the turn: the first model
// response and the publish come from the journal (one publish in all, one
// first-step model request in all), the model is asked only for the step
// that has no record — with the recorded call and result in its request —
// and the message is handled once, by a turn that says it resumed.
func TestTurnResumesFromItsJournalAfterACrash(t *testing.T) {
	st, pub, log := memstore.New(nil), &publishLog{}, newMemLog()
	report := call("publish", map[string]any{"subject": "ops.reports", "text": "disk full on db-1"})
	first := newHarnessWith(t, []config.ScriptStep{report, text("filed")}, deps(publishing(st, pub), withLog(log)), withPublish)
	first.holdCalls()
	log.add(first.a, inbox.Message{ID: "alert-1", Kind: inbox.Wake, Text: "disk full", Source: "test"})
	first.waitCall()
	first.step() // the first response (publish) goes on; the second call is held
	first.waitCall()
	if got := pub.published(); len(got) != 1 {
		t.Fatalf("published %v before the crash, want one report", got)
	}
	// The crash: the process stops inside the second model call.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	first.d.Shutdown(ctx)
	if log.cursor("in") != 0 {
		t.Fatal("the cursor passed the message of a turn that did not finish")
	}
	jr, err := journal.Load(t.Context(), st, "tester")
	if err != nil || jr == nil || jr.ModelSteps() != 1 || len(jr.Steps) != 2 {
		t.Fatalf("journal after the crash: %+v, %v", jr, err)
	}

	// The next process reads the message from the log again.
	second := newHarnessWith(t, []config.ScriptStep{text("filed")}, deps(publishing(st, pub), withLog(log)), withPublish)
	resumed := second.waitEvent(events.TurnResumed)
	if resumed.Data["steps"] != 2 {
		t.Fatalf("turn-resumed %v", resumed.Data)
	}
	done := second.waitEvent(events.TurnCompleted)
	second.waitIdle()
	if got := pub.published(); len(got) != 1 {
		t.Fatalf("published %v, want exactly one report across the crash", got)
	}
	if n := second.modelCalls(); n != 1 {
		t.Fatalf("the resumed turn made %d model calls, want 1 (the step with no record)", n)
	}
	if !hasToolResult(second, "publish") {
		t.Fatal("the resumed model call does not carry the recorded publish call and result")
	}
	if log.cursor("in") != 1 || len(log.deadLetters()) != 0 {
		t.Fatalf("cursor %d, dead letters %v; want the message handled once", log.cursor("in"), log.deadLetters())
	}
	if done.Data["turn"] != jr.Turn {
		t.Fatalf("the resumed turn is turn %v, want the journal's %d", done.Data["turn"], jr.Turn)
	}
	if last := second.a.Status().LastTurn; last == nil || last.Replayed != 2 {
		t.Fatalf("last turn %+v: want 2 steps replayed", last)
	}
}

// hasToolResult reports whether the harness's first model request holds a
// function response of tool.
func hasToolResult(h *harness, tool string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.requests[0].Contents {
		for _, p := range c.Parts {
			if p.FunctionResponse != nil && p.FunctionResponse.Name == tool {
				return true
			}
		}
	}
	return false
}

// flakyJournal lets the first ok writes of the journal key through and
// fails the rest.
type flakyJournal struct {
	store.Store
	mu sync.Mutex
	ok int
}

func (f *flakyJournal) Put(ctx context.Context, key string, v []byte) (uint64, error) {
	if key == journal.Key("tester") {
		f.mu.Lock()
		f.ok--
		fail := f.ok < 0
		f.mu.Unlock()
		if fail {
			return 0, store.ErrClosed
		}
	}
	return f.Store.Put(ctx, key, v)
}

// A crash after a tool's effect but before its result was recorded runs
// the tool again on resume — with the same action id, so the second
// publish can be recognised as a duplicate (Nats-Msg-Id). Until the
// result is recorded the turn makes no further model call.
func TestAToolRunAgainOnResumeKeepsItsActionID(t *testing.T) {
	st, pub, log := &flakyJournal{Store: memstore.New(nil), ok: 1}, &publishLog{}, newMemLog()
	report := call("publish", map[string]any{"subject": "ops.reports", "text": "disk full on db-1"})
	first := newHarnessWith(t, []config.ScriptStep{report, text("filed")}, deps(publishing(st, pub), withLog(log)), withPublish)
	log.add(first.a, inbox.Message{ID: "alert-1", Kind: inbox.Wake, Text: "disk full", Source: "test"})
	failed := first.waitEvent(events.TurnFailed)
	if failed.Data["outcome"] != OutcomeUnavailable {
		t.Fatalf("turn failed with %v, want unavailable (the journal write)", failed.Data)
	}
	if n := first.modelCalls(); n != 1 {
		t.Fatalf("%d model calls: the call after an unrecorded tool result must wait for the record", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	first.d.Shutdown(ctx)

	second := newHarnessWith(t, []config.ScriptStep{text("filed")}, deps(publishing(st.Store, pub), withLog(log)), withPublish)
	second.waitEvent(events.TurnResumed)
	second.waitEvent(events.TurnCompleted)
	got := pub.published()
	if len(got) != 2 || got[0] != got[1] || got[0] == "" {
		t.Fatalf("publishes %q: want the tool run again with its first action id", got)
	}
	if n := second.modelCalls(); n != 1 {
		t.Fatalf("the resumed turn made %d model calls, want 1", n)
	}
}

// An interrupted turn's journal is abandoned: the operator stopped that
// work, and the next turn starts over.
func TestAnInterruptedTurnAbandonsItsJournal(t *testing.T) {
	st, pub := memstore.New(nil), &publishLog{}
	report := call("publish", map[string]any{"subject": "ops.reports", "text": "x"})
	h := newHarnessWith(t, []config.ScriptStep{report, text("filed")}, publishing(st, pub), withPublish)
	h.holdCalls()
	h.a.Send(wakeMsg("disk full"))
	h.waitCall()
	h.step()
	h.waitCall()
	h.a.Interrupt(false)
	ab := h.waitEvent(events.JournalAbandoned)
	if ab.Data["reason"] != OutcomeInterrupted {
		t.Fatalf("abandoned %v", ab.Data)
	}
	if jr, _ := journal.Load(t.Context(), st, "tester"); jr != nil {
		t.Fatalf("journal still stored: %+v", jr)
	}
}

// storedJournal is a journal of turn 1 whose first response called
// publish, with no result yet.
func storedJournal(t *testing.T, st store.Store, started time.Time, durable []string) {
	t.Helper()
	jr := &journal.Journal{Turn: 1, Started: started, Messages: durable, Durable: durable, Prompt: "[wake: inbox]"}
	jr.AddModel(&model.LLMResponse{Content: &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{ID: "c1", Name: "publish", Args: map[string]any{"subject": "ops.reports", "text": "x"}}}}}})
	if err := journal.Save(t.Context(), st, "tester", jr); err != nil {
		t.Fatal(err)
	}
}

// A journal older than Spec.ResumeWithin is abandoned at restore, said
// with its reason, and deleted: nothing is replayed.
func TestAnExpiredJournalIsAbandoned(t *testing.T) {
	st := memstore.New(nil)
	storedJournal(t, st, epoch.Add(-2*time.Hour), nil)
	h := newHarnessWith(t, []config.ScriptStep{text("hello")}, publishing(st, &publishLog{}), withPublish)
	if ab := h.waitEvent(events.JournalAbandoned); ab.Data["reason"] != "expired" {
		t.Fatalf("abandoned %v", ab.Data)
	}
	if jr, _ := journal.Load(t.Context(), st, "tester"); jr != nil {
		t.Fatal("the expired journal is still stored")
	}
	h.a.Send(wakeMsg("next"))
	h.waitEvent(events.TurnCompleted)
	if n := h.count(events.TurnResumed); n != 0 {
		t.Fatalf("%d turn(s) resumed an expired journal", n)
	}
}

// A journal whose messages do not come back within Spec.ResumeWait holds
// the agent's turns until then, and is abandoned after: the turn that
// follows is an ordinary one.
func TestAJournalWhoseMessagesDoNotComeBackIsAbandoned(t *testing.T) {
	st := memstore.New(nil)
	storedJournal(t, st, epoch, []string{"gone-1"})
	pub := &publishLog{}
	h := newHarnessWith(t, []config.ScriptStep{text("hello")}, publishing(st, pub), withPublish)
	h.a.Send(wakeMsg("another message"))
	// The agent restored the journal and holds its turns until the
	// messages come back: a timer is armed for the wait's end.
	end := time.Now().Add(deadline)
	for !h.a.jr.holding() {
		if time.Now().After(end) {
			t.Fatal("the agent never held its turns for the journal's messages")
		}
		<-time.After(time.Millisecond)
	}
	if n := h.modelCalls(); n != 0 {
		t.Fatalf("%d model calls while the journal's messages were awaited", n)
	}
	h.clock.Advance(DefaultResumeWait + time.Second)
	if ab := h.waitEvent(events.JournalAbandoned); ab.Data["reason"] != "inputs_missing" {
		t.Fatalf("abandoned %v", ab.Data)
	}
	h.waitIdle()
	if n := h.count(events.TurnCompleted); n != 1 {
		t.Fatalf("%d turns completed, want the ordinary one", n)
	}
	if n := h.count(events.TurnResumed); n != 0 || len(pub.published()) != 0 {
		t.Fatalf("resumed %d, published %v: the abandoned journal was replayed", n, pub.published())
	}
}

// A turn that fails in its second model call (the provider down) is
// retried in the same process from its journal: the first response is
// not asked again, the publish not made again.
func TestARetriedTurnResumesFromItsJournal(t *testing.T) {
	st, pub, log := memstore.New(nil), &publishLog{}, newMemLog()
	report := call("publish", map[string]any{"subject": "ops.reports", "text": "disk full"})
	h := newHarnessWith(t, []config.ScriptStep{report, text("filed")}, deps(publishing(st, pub), withLog(log)), withPublish)
	h.failCalls(nil, outage.Mark("model", errors.New("provider down")))
	log.add(h.a, inbox.Message{ID: "alert-1", Kind: inbox.Wake, Text: "disk full", Source: "test"})
	if f := h.waitEvent(events.TurnFailed); f.Data["outcome"] != OutcomeUnavailable {
		t.Fatalf("failed %v", f.Data)
	}
	h.clock.Advance(time.Hour) // past the retry's backoff
	h.waitEvent(events.TurnResumed)
	h.waitEvent(events.TurnCompleted)
	if got := pub.published(); len(got) != 1 {
		t.Fatalf("published %v, want one report", got)
	}
	if n := h.modelCalls(); n != 3 {
		t.Fatalf("%d model calls, want 3: the first step, the failed second, the second again", n)
	}
}

// schedule_next_turn's effect lives in the turn's memory: a resumed turn
// runs it again instead of taking its recorded result, so the wake it
// asked for is still set when the resumed turn ends.
func TestAResumedTurnKeepsItsRequestedWake(t *testing.T) {
	st, log := memstore.New(nil), newMemLog()
	later := call("schedule_next_turn", map[string]any{"wake_in_seconds": 600})
	first := newHarnessWith(t, []config.ScriptStep{later, text("see you")}, deps(publishing(st, &publishLog{}), withLog(log)))
	first.holdCalls()
	log.add(first.a, inbox.Message{ID: "m1", Kind: inbox.Wake, Text: "check back later", Source: "test"})
	first.waitCall()
	first.step()
	first.waitCall()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	first.d.Shutdown(ctx)

	second := newHarnessWith(t, []config.ScriptStep{text("see you")}, deps(publishing(st, &publishLog{}), withLog(log)))
	second.waitEvent(events.TurnResumed)
	ws := second.waitEvent(events.WakeScheduled)
	if at, _ := ws.Data["at"].(time.Time); !at.Equal(epoch.Add(600 * time.Second)) {
		t.Fatalf("wake scheduled %v, want the resumed request's %v", ws.Data["at"], epoch.Add(600*time.Second))
	}
}

// holding reports whether the journaler holds the agent's turns for a
// pending journal's messages (its wait's timer is armed).
func (j *journaler) holding() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.pending != nil && j.arming
}
