// Package control is the operator's verbs on an agent — pause, resume,
// interrupt, wake — as one request/reply shape shared by every transport
// (the NATS control subject here, the HTTP API later). It goes through the
// driver's own methods, so it cannot bypass the gate.
package control

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/natsbus"
)

// Verbs.
const (
	VerbPause     = "pause"
	VerbResume    = "resume"
	VerbInterrupt = "interrupt"
	VerbWake      = "wake"
)

// Request is an operator's request.
type Request struct {
	Verb string `json:"verb"`
	// Message goes with resume (and wake) as a trusted operator
	// instruction for the next turn.
	Message string `json:"message,omitempty"`
	// Hold, with interrupt, also pauses the agent. Default true.
	Hold *bool `json:"hold,omitempty"`
}

// Reply answers a Request.
type Reply struct {
	OK    bool   `json:"ok"`
	Agent string `json:"agent,omitempty"`
	Verb  string `json:"verb,omitempty"`
	// State is the agent's state after the verb.
	State string `json:"state,omitempty"`
	// TurnRunning, for interrupt: whether a turn was cancelled.
	TurnRunning *bool  `json:"turn_running,omitempty"`
	Error       string `json:"error,omitempty"`
}

// Apply carries out req on a.
func Apply(a *driver.Agent, req Request) Reply {
	r := Reply{Agent: a.Name(), Verb: req.Verb}
	switch req.Verb {
	case VerbPause:
		a.Pause()
	case VerbResume:
		if err := a.Resume(req.Message); err != nil {
			r.Error = err.Error()
		}
	case VerbInterrupt:
		hold := req.Hold == nil || *req.Hold
		running := a.Interrupt(hold)
		r.TurnRunning = &running
	case VerbWake:
		switch a.State() {
		case driver.Paused:
			r.Error = "agent is paused: only resume runs a turn"
		case driver.Halted:
			r.Error = "agent is halted by a guardrail: reset it first"
		case driver.Stopped:
			r.Error = "agent is stopped"
		default:
			a.Wake(driver.Cause{Source: driver.SourceOperator, Instruction: req.Message})
		}
	default:
		r.Error = fmt.Sprintf("unknown verb %q (want pause, resume, interrupt or wake)", req.Verb)
	}
	r.OK = r.Error == ""
	r.State = string(a.State())
	return r
}

// ServeNATS answers requests on every agent's control subject until the
// returned subscription is unsubscribed. Requests are JSON Requests;
// replies are JSON Replies, also for errors (bad JSON, unknown agent).
func ServeNATS(nc *nats.Conn, subjects natsbus.Subjects, d *driver.Driver, log *slog.Logger) (*nats.Subscription, error) {
	sub, err := nc.Subscribe(subjects.AllControl(), func(m *nats.Msg) {
		name, _, _ := subjects.Agent(m.Subject)
		var reply Reply
		a, err := d.Agent(name)
		var req Request
		switch {
		case err != nil:
			reply = Reply{Agent: name, Error: err.Error()}
		case json.Unmarshal(m.Data, &req) != nil:
			reply = Reply{Agent: name, Error: `body must be JSON like {"verb": "pause"}`}
		default:
			reply = Apply(a, req)
		}
		log.Info("control request", "agent", name, "verb", req.Verb, "ok", reply.OK, "error", reply.Error)
		if m.Reply == "" {
			return
		}
		data, _ := json.Marshal(reply)
		if err := m.Respond(data); err != nil {
			log.Warn("control reply failed", "agent", name, "error", err)
		}
	})
	if err != nil {
		return nil, err
	}
	// Once Start returns, requests must find a responder.
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	return sub, nil
}
