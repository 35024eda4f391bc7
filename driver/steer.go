package driver

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/adk/agent"
	"google.golang.org/adk/model"
	"google.golang.org/adk/plugin"
	"google.golang.org/adk/session"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/hook"
)

// ErrPaused refuses what must not run behind an operator's pause (a
// steered message with no turn running: it would wake the agent).
var ErrPaused = errors.New("agent is paused")

// steer is an operator's message for the running turn (Agent.Steer).
type steer struct {
	id   string
	text string
	by   hook.Audit
	at   time.Time
}

// Steered says where a steered message went (Agent.Steer). It is also
// the operator API's answer to a steered message.
type Steered struct {
	// Status is "steered" (a running turn takes it) or "woke" (no turn
	// ran: it woke the agent).
	Status string `json:"status"`
	// ID names the message; message-handled lookups find it under it once
	// its turn is recorded.
	ID string `json:"id"`
	// Turn is the running turn that takes it before its next model call;
	// 0 when no turn was running and it woke the agent instead (Woke).
	Turn uint64 `json:"turn,omitempty"`
	Woke bool   `json:"woke,omitempty"`
}

// Steer gives text, an operator's message, to the running turn: it is
// shown to the model before the turn's next model call, framed as operator
// text (trusted, outside the external-data fence), and recorded in that
// turn's history with the turn's other input; the turn-completed event and
// message lookups name its id among the turn's. With no turn running it
// wakes the agent with text as an operator message (WakeAs), as a message
// would — refused with ErrPaused or hook.ErrHalted behind a closed gate, and
// ErrStopped when the agent is stopping.
//
// Guarantees: a steered message is seen by exactly one turn. If the turn
// makes no further model call, the message runs in the next turn as an
// operator message; if the turn fails, it rides along with the turn's
// other tasks (its retry). Not guaranteed: a steered message lives in
// this process only (like an operator's wake message), so a crash before
// its turn is recorded loses it, and a turn resumed from its journal
// after a restart does not show it.
func (a *Agent) Steer(by hook.Audit, text string) (Steered, error) {
	id := "steer-" + rand.Text()
	a.mu.Lock()
	switch {
	case a.gate.stopping:
		a.mu.Unlock()
		return Steered{}, ErrStopped
	case a.running && a.current != nil && !a.current.settled:
		n := a.current.n
		a.steers = append(a.steers, steer{id: id, text: text, by: by, at: a.clock.Now()})
		a.mu.Unlock()
		a.log.Info("operator message queued for the running turn", "id", id, "turn", n, "by", by.By)
		return Steered{Status: "steered", ID: id, Turn: n}, nil
	case a.gate.paused:
		a.mu.Unlock()
		return Steered{}, ErrPaused
	case a.gate.halt != "":
		a.mu.Unlock()
		return Steered{}, hook.ErrHalted
	}
	a.mu.Unlock()
	a.wake(Cause{Source: SourceOperator, Instruction: text}, audited(by, map[string]any{"id": id, "steer": true}))
	return Steered{Status: "woke", ID: id, Woke: true}, nil
}

// steerPlugin hands the running turn the operator messages steered to it
// (Steer), before each of its model calls: the request gets them as one
// user content after everything the turn has seen so far, and the turn's
// session gets the same content as an event, so the turn's later model
// calls and its history record show it where it arrived.
func (a *Agent) steerPlugin() *plugin.Plugin {
	p, _ := plugin.New(plugin.Config{
		Name: "steer",
		BeforeModelCallback: func(ctx agent.CallbackContext, req *model.LLMRequest) (*model.LLMResponse, error) {
			a.mu.Lock()
			cur := a.current
			if cur == nil || len(a.steers) == 0 {
				a.mu.Unlock()
				return nil, nil
			}
			ss := a.steers
			a.steers = nil
			cur.steered = append(cur.steered, ss...)
			a.mu.Unlock()
			c := genai.NewContentFromText(steerText(ss), genai.RoleUser)
			req.Contents = append(req.Contents, c)
			ev := session.NewEvent(ctx.InvocationID())
			ev.Author = "user"
			ev.Content = c
			if !a.hist.Inject(AppName, a.spec.Name, a.spec.Name, ev) {
				a.log.Warn("steered message not recorded in the turn's history: no turn in progress", "turn", cur.n)
			}
			for _, s := range ss {
				a.log.Info("operator message steered into the running turn", "id", s.id, "turn", cur.n, "by", s.by.By)
				a.emit(events.Steered, audited(s.by, map[string]any{"id": s.id, "turn": cur.n}))
			}
			return nil, nil
		},
	})
	return p
}

// steerText frames steered messages as operator text.
func steerText(ss []steer) string {
	var b strings.Builder
	for i, s := range ss {
		if i > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "[operator message, sent while you were working on this turn, at %s]\nMessage from the operator:\n%s", s.at.UTC().Format(time.RFC3339), s.text)
	}
	return b.String()
}

// endSteers settles the running turn's steered messages as it ends: seen
// are those its model calls were shown, left those that came after its
// last one. Callers must not hold mu.
func (a *Agent) endSteers() (seen, left []steer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	left, a.steers = a.steers, nil
	if a.current != nil {
		seen = a.current.steered
		a.current.settled = true // later steers wake the agent instead
	}
	return seen, left
}

// steerCauses turns steered messages back into operator messages for a
// later turn.
func steerCauses(ss []steer) []Cause {
	cs := make([]Cause, 0, len(ss))
	for _, s := range ss {
		cs = append(cs, Cause{Source: SourceOperator, At: s.at, Instruction: s.text})
	}
	return cs
}

// steerIDs returns the ids of steered messages.
func steerIDs(ss []steer) []string {
	ids := make([]string, 0, len(ss))
	for _, s := range ss {
		ids = append(ids, s.id)
	}
	return ids
}
