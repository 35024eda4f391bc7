// Package journal keeps each agent's turn journal: the inputs of the turn
// under way and every model response and tool result it has had so far,
// written as each completes, so that a turn cut short — the worker killed,
// its lease lost, a dependency down — is resumed by the agent's next turn
// (recorded steps replayed, not redone) instead of starting over with a
// second paid model call and a second side effect.
//
// It stores and reads journals; it must not run turns, nor decide when a
// journal is resumed or abandoned: the driver does.
//
// # Guarantees and limits
//
//   - One journal per agent, under Key(agent), rewritten whole at every
//     step (a Put): the newest step is durable when Save returns.
//   - A journal is at most MaxBytes encoded. Tool results are clipped to
//     ResultClip bytes of JSON as they are recorded (the model is told, as
//     history clipping tells it); a journal that would still exceed
//     MaxBytes is refused with ErrTooLarge and the caller stops journaling
//     that turn.
//   - Steps are a prefix of the turn: a model response is recorded before
//     any tool it asked for runs, and a tool result after the tool ran. A
//     tool whose effect happened but whose result was not recorded (a crash
//     in between) runs again on resume: its side effect must be idempotent
//     under ActionID, which stays the same across resumes.
package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/store"
)

// MaxBytes bounds an encoded journal.
const MaxBytes = 768 << 10 // under NATS' default 1 MiB payload, above turn.max_input_bytes (256 KiB)

// ResultClip bounds one recorded tool result, as JSON.
const ResultClip = 16 << 10

// ErrTooLarge is returned by Save for a journal above MaxBytes.
var ErrTooLarge = errors.New("turn journal above its size bound")

// Journal is one turn's record so far.
type Journal struct {
	// Turn is the number of the turn that began the journal; a resumed
	// turn keeps it, so it names the turn's side effects (ActionID).
	Turn    uint64    `json:"turn"`
	Started time.Time `json:"started"`
	// Wakes are what woke the turn, as its prompt names them.
	Wakes []string `json:"wakes,omitempty"`
	// Messages are the ids of the messages the turn drained, in order;
	// Durable, those of them that come back after a crash (they have a
	// JetStream receipt): a resume waits for these.
	Messages []string `json:"messages,omitempty"`
	Durable  []string `json:"durable,omitempty"`
	// Prompt is the rendered prompt as the turn sent it.
	Prompt string `json:"prompt"`
	Steps  []Step `json:"steps,omitempty"`
	// Resumes counts how often the turn was resumed so far.
	Resumes int `json:"resumes,omitempty"`
}

// Step is one completed model response, or one tool call's result.
type Step struct {
	Model *Response `json:"model,omitempty"`
	// Call is the tool call's function call id, Tool its tool.
	Call    string         `json:"call,omitempty"`
	Tool    string         `json:"tool,omitempty"`
	Result  map[string]any `json:"result,omitempty"`
	Clipped bool           `json:"clipped,omitempty"`
}

// Response is what of a model response a replay returns.
type Response struct {
	Content      *genai.Content                              `json:"content"`
	Usage        *genai.GenerateContentResponseUsageMetadata `json:"usage,omitempty"`
	FinishReason genai.FinishReason                          `json:"finish_reason,omitempty"`
	ModelVersion string                                      `json:"model_version,omitempty"`
}

// RecordOf is the part of resp a journal keeps.
func RecordOf(resp *model.LLMResponse) *Response {
	return &Response{Content: resp.Content, Usage: resp.UsageMetadata, FinishReason: resp.FinishReason, ModelVersion: resp.ModelVersion}
}

// LLMResponse is the recorded response as ADK takes it back.
func (r *Response) LLMResponse() *model.LLMResponse {
	return &model.LLMResponse{Content: r.Content, UsageMetadata: r.Usage, FinishReason: r.FinishReason, ModelVersion: r.ModelVersion, TurnComplete: true}
}

// Model returns the k-th (0-based) recorded model response, or nil.
func (j *Journal) Model(k int) *Response {
	for _, s := range j.Steps {
		if s.Model == nil {
			continue
		}
		if k == 0 {
			return s.Model
		}
		k--
	}
	return nil
}

// ModelSteps counts the recorded model responses.
func (j *Journal) ModelSteps() int {
	n := 0
	for _, s := range j.Steps {
		if s.Model != nil {
			n++
		}
	}
	return n
}

// Result returns the recorded result of the tool call with id call to
// tool, if there is one.
func (j *Journal) Result(call, tool string) (map[string]any, bool) {
	for _, s := range j.Steps {
		if s.Model == nil && s.Call == call && s.Tool == tool {
			return s.Result, true
		}
	}
	return nil, false
}

// AddModel records a completed model response.
func (j *Journal) AddModel(resp *model.LLMResponse) {
	j.Steps = append(j.Steps, Step{Model: RecordOf(resp)})
}

// AddResult records a tool call's result, clipped to ResultClip.
func (j *Journal) AddResult(call, tool string, result map[string]any) {
	r, clipped := Clip(result, ResultClip)
	j.Steps = append(j.Steps, Step{Call: call, Tool: tool, Result: r, Clipped: clipped})
}

// Clip returns result, or when its JSON is above limit bytes a result
// that holds its first bytes and says how much was cut.
func Clip(result map[string]any, limit int) (map[string]any, bool) {
	raw, err := json.Marshal(result)
	if err != nil {
		return map[string]any{"error": "tool result not recordable: " + err.Error()}, true
	}
	if len(raw) <= limit {
		return result, false
	}
	kept := textclip.Bytes(string(raw), limit-256, "")
	return map[string]any{
		"clipped": kept,
		"note":    "the tool result was " + strconv.Itoa(len(raw)) + " bytes; only its first " + strconv.Itoa(len(kept)) + " are kept",
	}, true
}

// Key is where an agent's journal is stored.
func Key(agent string) string { return "agent." + agent + ".journal" }

// Load returns the agent's stored journal, or nil when it has none.
func Load(ctx context.Context, st store.Store, agent string) (*Journal, error) {
	e, err := st.Get(ctx, Key(agent))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load turn journal: %w", err)
	}
	var j Journal
	if err := json.Unmarshal(e.Value, &j); err != nil {
		return nil, fmt.Errorf("turn journal of %s unreadable: %w", agent, err)
	}
	return &j, nil
}

// Save writes the journal whole through w (the agent's owner's writes,
// under its lease's fence); ErrTooLarge (nothing written) when it is
// above MaxBytes.
func Save(ctx context.Context, w store.Writer, agent string, j *Journal) error {
	raw, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("encode turn journal: %w", err)
	}
	if len(raw) > MaxBytes {
		return fmt.Errorf("%w: %d bytes, bound %d", ErrTooLarge, len(raw), MaxBytes)
	}
	if _, err := w.Put(ctx, Key(agent), raw); err != nil {
		return fmt.Errorf("save turn journal: %w", err)
	}
	return nil
}

// Delete removes the agent's journal through w (a missing one is no
// error).
func Delete(ctx context.Context, w store.Writer, agent string) error {
	return w.Delete(ctx, Key(agent))
}

// ActionID names a side effect of a turn: the tool call with function
// call id call in the turn journaled as turn, of agent. It is the same
// when the turn is resumed (the recorded model response keeps its call
// ids), so a publish or spawn made again after a crash carries the id of
// the first and can be recognised as a duplicate.
func ActionID(agent string, turn uint64, call string) string {
	return agent + "-t" + strconv.FormatUint(turn, 10) + "-" + call
}
