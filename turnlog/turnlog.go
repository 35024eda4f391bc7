package turnlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/store"
)

// Keep is how many turn summaries each agent's list holds: the newest
// Keep turns, whatever their outcome. It is the NATS KV store's list bound
// (natskv.MaxListItems), so an append there is one write with no trim.
const Keep = 64

// Bounds of one summary (Bound applies them): a record is at most about
// 32 KiB however large the turn was.
const (
	// MaxText bounds the turn's text, in runes.
	MaxText = 1000
	// MaxError bounds the error of a failed turn, in runes.
	MaxError = 500
	// MaxMessages bounds the messages listed; MessageCount counts all.
	MaxMessages = 50
	// MaxToolCalls bounds the tool calls listed; ToolCallCount counts all.
	MaxToolCalls = 20
	// MaxArgs bounds a tool call's arguments (JSON), in runes.
	MaxArgs = 200
	// MaxField bounds an id, a source, a wake or a tool's error, in runes.
	MaxField = 128
	// MaxWakes bounds the wake descriptions listed.
	MaxWakes = 20
)

// OutcomeCompleted is the outcome of a turn that completed and was
// recorded (driver.OutcomeCompleted): only such a turn handled its
// messages.
const OutcomeCompleted = "completed"

// Tool call outcomes.
const (
	ToolOK    = "ok"
	ToolError = "error"
	// ToolNoResult: the turn ended before the tool answered.
	ToolNoResult = "no_result"
)

// Turn summarises one finished turn, completed or not.
type Turn struct {
	N               uint64    `json:"n"`
	Started         time.Time `json:"started"`
	DurationSeconds float64   `json:"duration_seconds"`
	// Outcome is the driver's (completed, failed, timeout, interrupted,
	// halted, shutdown, capped, unavailable); Error says why when it is
	// not completed.
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
	// Wakes are the causes that woke the turn, as the prompt's wake line
	// names them ("inbox message ×3", "schedule \"morning\"").
	Wakes []string `json:"wakes"`
	// Messages are the first MaxMessages messages the turn drained, oldest
	// first; MessageCount counts them all.
	Messages     []Message `json:"messages"`
	MessageCount int       `json:"message_count"`
	// ToolCalls are the first MaxToolCalls tool calls, in order;
	// ToolCallCount counts them all.
	ToolCalls     []ToolCall `json:"tool_calls"`
	ToolCallCount int        `json:"tool_call_count"`
	ModelCalls    int        `json:"model_calls"`
	TokensIn      int        `json:"tokens_in"`
	TokensOut     int        `json:"tokens_out"`
	// CostUSD is what the turn's model calls cost (0 when unpriced).
	CostUSD float64 `json:"cost_usd"`
	// Text is what the model said in the turn, cut to MaxText runes.
	Text string `json:"text,omitempty"`
	// Replayed counts the steps the turn took from an unfinished turn's
	// journal (model responses not asked again, tool results not run
	// again): it resumed that turn.
	Replayed int `json:"replayed,omitempty"`
}

// Message is one message a turn drained.
type Message struct {
	ID     string `json:"id"`
	Source string `json:"source,omitempty"`
	// Kind is "inbox" (it woke the agent) or "deferred".
	Kind string `json:"kind,omitempty"`
}

// ToolCall is one tool call of a turn.
type ToolCall struct {
	Name string `json:"name"`
	// Args are the call's arguments as JSON, cut to MaxArgs runes.
	Args string `json:"args,omitempty"`
	// Outcome is ToolOK, ToolError or ToolNoResult; Error the tool's
	// error, cut to MaxField runes.
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
}

// Bound cuts t to the bounds above, keeping the counts of what it drops.
func (t *Turn) Bound() {
	t.Text = textclip.RunesWithin(t.Text, MaxText, "…")
	t.Error = textclip.RunesWithin(t.Error, MaxError, "…")
	if len(t.Wakes) > MaxWakes {
		t.Wakes = t.Wakes[:MaxWakes]
	}
	for i := range t.Wakes {
		t.Wakes[i] = textclip.RunesWithin(t.Wakes[i], MaxField, "…")
	}
	t.MessageCount = max(t.MessageCount, len(t.Messages))
	if len(t.Messages) > MaxMessages {
		t.Messages = t.Messages[:MaxMessages]
	}
	for i := range t.Messages {
		m := &t.Messages[i]
		m.ID, m.Source, m.Kind = textclip.RunesWithin(m.ID, MaxField, "…"), textclip.RunesWithin(m.Source, MaxField, "…"), textclip.RunesWithin(m.Kind, MaxField, "…")
	}
	t.ToolCallCount = max(t.ToolCallCount, len(t.ToolCalls))
	if len(t.ToolCalls) > MaxToolCalls {
		t.ToolCalls = t.ToolCalls[:MaxToolCalls]
	}
	for i := range t.ToolCalls {
		c := &t.ToolCalls[i]
		c.Name, c.Args, c.Error = textclip.RunesWithin(c.Name, MaxField, "…"), textclip.RunesWithin(c.Args, MaxArgs, "…"), textclip.RunesWithin(c.Error, MaxField, "…")
	}
	if t.Wakes == nil {
		t.Wakes = []string{}
	}
	if t.Messages == nil {
		t.Messages = []Message{}
	}
	if t.ToolCalls == nil {
		t.ToolCalls = []ToolCall{}
	}
}

// ListKey is the store list holding an agent's turn summaries.
func ListKey(agent string) string { return "turnlog." + agent }

// Log records and reads turn summaries and message fates in a store. It is
// safe for concurrent use.
type Log struct {
	st  store.Store
	log *slog.Logger
	w   *writer
}

// New returns a Log over st; log (nil: discard) hears about records that
// could not be written.
func New(st store.Store, log *slog.Logger) *Log {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Log{st: st, log: log, w: newWriter(log)}
}

// Record queues t (bounded first) as agent's newest turn summary, to be
// appended in the background after the writes queued before it for the
// agent. under is asked just before the write for where it goes (the
// store under the fence of the agent's lease): when it reports false
// (this replica lost the agent meanwhile) nothing is written and the skip
// is logged, as it is when the store refuses the fence. under nil writes
// unconditionally.
func (l *Log) Record(agent string, t Turn, under func() (store.Writer, bool)) {
	t.Bound()
	raw, err := json.Marshal(t)
	if err != nil {
		l.log.Error("turn summary not recorded: cannot encode it", "agent", agent, "turn", t.N, "error", err)
		return
	}
	l.w.enqueue(agent, job{what: fmt.Sprintf("summary of turn %d", t.N), run: func(ctx context.Context) error {
		var w store.Writer = l.st
		if under != nil {
			var ok bool
			if w, ok = under(); !ok {
				l.log.Warn("turn summary not recorded: this replica no longer owns the agent", "agent", agent, "turn", t.N)
				return nil
			}
		}
		err := w.Append(ctx, ListKey(agent), raw, Keep)
		if errors.Is(err, store.ErrFenced) {
			l.log.Warn("turn summary not recorded: the agent's lease moved", "agent", agent, "turn", t.N)
			return nil
		}
		return err
	}})
}

// Flush waits until every queued write has been tried, or ctx ends.
func (l *Log) Flush(ctx context.Context) error { return l.w.flush(ctx) }

// Recent returns agent's newest n turn summaries (n clamped to 1..Keep),
// newest first. Items that do not decode are skipped and logged.
func (l *Log) Recent(ctx context.Context, agent string, n int) ([]Turn, error) {
	n = min(max(n, 1), Keep)
	raw, err := l.st.Tail(ctx, ListKey(agent), n)
	if err != nil {
		return nil, fmt.Errorf("read turns of %s: %w", agent, err)
	}
	out := make([]Turn, 0, len(raw))
	for i := len(raw) - 1; i >= 0; i-- {
		var t Turn
		if err := json.Unmarshal(raw[i], &t); err != nil {
			l.log.Warn("unreadable turn summary skipped", "agent", agent, "error", err)
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

// Find returns agent's summary of turn n, if the list still holds it.
func (l *Log) Find(ctx context.Context, agent string, n uint64) (Turn, bool, error) {
	turns, err := l.Recent(ctx, agent, Keep)
	if err != nil {
		return Turn{}, false, err
	}
	for _, t := range turns {
		if t.N == n {
			return t, true, nil
		}
	}
	return Turn{}, false, nil
}

// FindMessage returns the newest completed turn whose summary lists a
// message with id: the record of last resort for a message handled where
// no handled id is kept (core NATS, the API without JetStream). It sees
// only the first MaxMessages messages of each turn.
func (l *Log) FindMessage(ctx context.Context, agent, id string) (Turn, bool, error) {
	turns, err := l.Recent(ctx, agent, Keep)
	if err != nil {
		return Turn{}, false, err
	}
	for _, t := range turns {
		if t.Outcome != OutcomeCompleted {
			continue // its messages went back to the inbox
		}
		for _, m := range t.Messages {
			if m.ID == id {
				return t, true, nil
			}
		}
	}
	return Turn{}, false, nil
}
