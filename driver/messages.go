package driver

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/turnlog"
)

// MaxEventIDs bounds the message ids a turn event lists (turn-started,
// turn-completed, turn-failed: "ids"); "messages" counts them all.
const MaxEventIDs = 50

// Message states as the agent's owner knows them (Agent.Message).
const (
	// MessageQueued: waiting in the inbox.
	MessageQueued = "queued"
	// MessageRunning: drained by the turn running now (Turn).
	MessageRunning = "running"
	// MessageHandled: handled by a completed turn (Turn) that is still in
	// the history window.
	MessageHandled = "handled"
	// MessageUnknown: none of these. The store may still know it: handled
	// longer ago, or dead-lettered (package turnlog).
	MessageUnknown = "unknown"
)

// MessageState is what the agent's owner knows of one message right now.
type MessageState struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// Turn is the turn running it (running) or that handled it (handled).
	Turn     uint64     `json:"turn,omitempty"`
	Kind     string     `json:"kind,omitempty"`
	Source   string     `json:"source,omitempty"`
	Received *time.Time `json:"received,omitempty"`
	// Attempts counts failed turns that took it and gave it back.
	Attempts int `json:"attempts,omitempty"`
	// Sender is who the worker authenticated as the sender
	// (inbox.Message.Sender); "" for a message published on NATS.
	Sender string `json:"sender,omitempty"`
}

// runningTurn is the turn in progress and the messages it took.
type runningTurn struct {
	n    uint64
	msgs []inbox.Message
	// fence is the lease's fence the turn began under (leasePlugin).
	fence turnFence
	// steered are the operator messages its model calls were shown
	// (steer.go); settled: the turn has ended and takes no more.
	steered []steer
	settled bool
}

// Message looks the message with id up in the agent's memory: in the
// running turn, the inbox, or the turns of the history window. The answer
// is exact for this replica at the moment of the call: taking messages
// into a turn and settling them after it happen under the lock Message
// takes, so a message is never between two states here. Only the agent's
// owner knows queued and running messages; ask it (control.Control.Do).
func (a *Agent) Message(id string) MessageState {
	st := MessageState{ID: id, Status: MessageUnknown}
	if id == "" {
		return st
	}
	of := func(m inbox.Message) {
		st.Kind, st.Source, st.Sender, st.Attempts = string(m.Kind), m.Source, m.Sender, m.Attempts
		if !m.Received.IsZero() {
			r := m.Received
			st.Received = &r
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.current; c != nil {
		for _, m := range c.msgs {
			if m.ID == id {
				st.Status, st.Turn = MessageRunning, c.n
				of(m)
				return st
			}
		}
	}
	var found *inbox.Message
	// A match that keeps everything walks the queue under the inbox's lock
	// and changes nothing.
	a.inbox.Remove(func(m inbox.Message) bool {
		if found == nil && m.ID == id {
			found = &m
		}
		return false
	})
	if found != nil {
		st.Status = MessageQueued
		of(*found)
		return st
	}
	if n, ok := a.handled[id]; ok {
		st.Status, st.Turn = MessageHandled, n
	}
	return st
}

// newMessageID makes an id for a message that arrived without one, so
// every message can be looked up and named in turn events.
func newMessageID() string { return "msg-" + rand.Text() }

// stamped is m as the inbox keeps it: an id made up when it has none, the
// time it arrived when unknown, wake when its kind is unset.
func (a *Agent) stamped(m inbox.Message) inbox.Message {
	if m.ID == "" {
		m.ID = newMessageID()
	}
	if m.Received.IsZero() {
		m.Received = a.clock.Now()
	}
	if m.Kind == "" {
		m.Kind = inbox.Wake
	}
	return m
}

// giveUp settles m, leaving the inbox without a turn for reason (detail
// in words): a message from the log is dead-lettered there (its
// dead-lettering records why); one only memory held gets a dead-letter
// record, so GET /v1/agents/{name}/messages/{id} says why it is gone. It
// reports whether m was dead-lettered.
func (a *Agent) giveUp(m inbox.Message, reason, detail string) bool {
	if m.Pos.InLog() && a.input != nil {
		return a.deadLetter(m, reason, detail)
	}
	if m.ID != "" && a.records != nil {
		a.records.DeadLetter(a.spec.Name, turnlog.DeadLetter{ID: m.ID, Reason: reason, Detail: detail, Subject: m.Source, At: a.clock.Now()}, 0)
	}
	return false
}

// announceHandled emits message-handled for each message of completed
// turn n, after its turn-completed.
func (a *Agent) announceHandled(n uint64, msgs []inbox.Message) {
	for _, m := range msgs {
		a.emit(events.MessageHandled, map[string]any{"id": m.ID, "turn": n, "source": m.Source, "kind": string(m.Kind), "outcome": OutcomeCompleted})
	}
}

// endCurrent forgets the running turn's messages: they are handled,
// requeued or let go by now.
func (a *Agent) endCurrent() {
	a.mu.Lock()
	a.current = nil
	a.mu.Unlock()
}

// messageIDs returns the ids of the first MaxEventIDs messages.
func messageIDs(msgs []inbox.Message) []string {
	ids := make([]string, 0, min(len(msgs), MaxEventIDs))
	for _, m := range msgs[:min(len(msgs), MaxEventIDs)] {
		ids = append(ids, m.ID)
	}
	return ids
}

// toolCalls collects a turn's tool calls for its summary: the first
// turnlog.MaxToolCalls, each with its outcome once its response is seen.
type toolCalls struct {
	calls []turnlog.ToolCall
	ids   []string // the calls' function-call ids, to match responses
}

func (tc *toolCalls) call(fc *genai.FunctionCall) {
	if len(tc.calls) >= turnlog.MaxToolCalls {
		return
	}
	args := ""
	if len(fc.Args) > 0 {
		raw, _ := json.Marshal(fc.Args)
		args = textclip.RunesWithin(string(raw), turnlog.MaxArgs, "…")
	}
	tc.calls = append(tc.calls, turnlog.ToolCall{Name: fc.Name, Args: args, Outcome: turnlog.ToolNoResult})
	tc.ids = append(tc.ids, fc.ID)
}

// response settles the oldest open call it answers: the same call id, or
// the same name when either has no id.
func (tc *toolCalls) response(fr *genai.FunctionResponse) {
	for i, c := range tc.calls {
		if c.Outcome != turnlog.ToolNoResult {
			continue
		}
		if id := tc.ids[i]; id != "" && fr.ID != "" {
			if id != fr.ID {
				continue
			}
		} else if c.Name != fr.Name {
			continue
		}
		tc.calls[i].Outcome = turnlog.ToolOK
		if e, ok := fr.Response["error"]; ok && e != nil {
			tc.calls[i].Outcome = turnlog.ToolError
			tc.calls[i].Error = textclip.RunesWithin(fmt.Sprint(e), turnlog.MaxField, "…")
		}
		return
	}
}

// summary is the turnlog record of a finished turn.
func summary(sum TurnSummary, batch []inbox.Message) turnlog.Turn {
	t := turnlog.Turn{
		N: sum.N, Started: sum.Started, DurationSeconds: sum.Duration.Seconds(), Outcome: sum.Outcome, Error: sum.Error,
		Wakes: append([]string(nil), sum.Wakes...), MessageCount: len(batch), ToolCalls: slices.Clone(sum.tools.calls), ToolCallCount: sum.ToolCalls,
		ModelCalls: sum.ModelCalls, TokensIn: sum.TokensIn, TokensOut: sum.TokensOut, CostUSD: sum.CostUSD, Text: sum.Text, Replayed: sum.Replayed,
	}
	for _, m := range batch[:min(len(batch), turnlog.MaxMessages)] {
		t.Messages = append(t.Messages, turnlog.Message{ID: m.ID, Source: m.Source, Kind: string(m.Kind)})
	}
	return t
}
