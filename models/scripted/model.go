package scripted

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"google.golang.org/adk/model"

	"github.com/agent-worker/agent-worker/config"
)

// BehaviourDemo is the config.Model.Behaviour value that selects the built-in
// demo conversation instead of a script.
const BehaviourDemo = "demo"

// ErrExhausted is wrapped by the error a call returns when the script has no
// steps left and config.Model.Loop is false.
var ErrExhausted = errors.New("script exhausted")

// StepError is the error a call returns for a script step with an Error
// message. Its text is `scripted model "<name>": step <i> (line <L>): <msg>`;
// the line part is left out when the step has no line (a script built in Go
// rather than read from a file).
type StepError struct {
	// Model is the model's config key.
	Model string
	// Step is the 1-based index of the step in the script.
	Step int
	// Line is the step's line in its file, 0 when unknown.
	Line int
	// Message is the step's Error text.
	Message string
}

func (e *StepError) Error() string {
	return fmt.Sprintf("scripted model %q: %s: %s", e.Model, stepLabel(e.Step, e.Line), e.Message)
}

func stepLabel(step, line int) string {
	if line > 0 {
		return fmt.Sprintf("step %d (line %d)", step, line)
	}
	return fmt.Sprintf("step %d", step)
}

// Hook runs before every call to GenerateContent, with the call's 1-based
// number. A non-nil error becomes the call's error and no script step is
// consumed. A hook may block (to hold a call until a test releases it), but
// it must return when ctx is done.
type Hook func(ctx context.Context, req *model.LLMRequest, call int) error

// Option configures a Model.
type Option func(*Model)

// WithHook installs h to run before every call. Later hooks replace earlier ones.
// It does not run for memory folds (see WithFoldHook).
func WithHook(h Hook) Option {
	return func(m *Model) { m.hook = h }
}

// WithFoldHook installs h to run before every memory fold the model
// answers (a request of package memory; see summarise.go), with the
// fold's 1-based number. A non-nil error becomes the fold's error, so a
// test can make the summariser fail; it may block until ctx is done.
func WithFoldHook(h Hook) Option {
	return func(m *Model) { m.foldHook = h }
}

// Model is a model.LLM that plays a script, one step per call, or the demo
// behaviour.
//
// A Model holds ONE cursor into its script. Agents must not share an
// instance: the caller creates one Model per agent, and that is what gives
// each agent its own cursor. A Model is safe for concurrent use; concurrent
// calls take distinct steps, in an unspecified order.
type Model struct {
	key       string // config key, for messages
	name      string // what Name reports
	script    []config.ScriptStep
	loop      bool
	behaviour string
	hook      Hook
	foldHook  Hook
	idPrefix  string

	mu     sync.Mutex
	calls  int // GenerateContent calls made, including failed ones; folds aside
	folds  int // memory folds asked for, including failed ones
	served int // script steps consumed
	ids    int // function call IDs handed out
}

var _ model.LLM = (*Model)(nil)

// New returns a Model for the model definition m, whose config key is name.
// It fails when m has neither a script nor a known behaviour, or when a step
// is malformed (a call without a name). With Behaviour "demo" the script is
// ignored.
func New(name string, m config.Model, opts ...Option) (*Model, error) {
	switch m.Behaviour {
	case "", BehaviourDemo:
	default:
		return nil, fmt.Errorf("scripted model %q: unknown behaviour %q (want %q)", name, m.Behaviour, BehaviourDemo)
	}
	if m.Behaviour == "" {
		if len(m.Script) == 0 {
			return nil, fmt.Errorf("scripted model %q: no script steps and no behaviour", name)
		}
		for i, s := range m.Script {
			if s.Call != nil && s.Call.Name == "" {
				return nil, fmt.Errorf("scripted model %q: %s: call has no name", name, stepLabel(i+1, s.Line))
			}
		}
	}
	md := &Model{
		key:       name,
		name:      m.Model,
		script:    append([]config.ScriptStep(nil), m.Script...),
		loop:      m.Loop,
		behaviour: m.Behaviour,
		idPrefix:  "call-" + nonce() + "-",
	}
	if md.name == "" {
		md.name = name
	}
	for _, o := range opts {
		o(md)
	}
	return md, nil
}

// nonce makes function call IDs unique across Model instances, and so across
// restarts: ADK pairs calls with responses by ID over the whole session
// history, which may outlive this process.
func nonce() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms.
	return hex.EncodeToString(b[:])
}

// Name returns config.Model.Model, or the config key when that is empty.
func (m *Model) Name() string { return m.name }

// Calls returns how many calls GenerateContent has started so far, including
// calls that failed or were cancelled — memory folds aside (see Folds).
func (m *Model) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// Folds returns how many memory folds the model was asked for, including
// those that failed.
func (m *Model) Folds() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.folds
}

// GenerateContent yields exactly one complete, non-partial response or one
// error per call, whether or not stream is set. The work happens when the
// returned sequence is iterated.
//
// A memory fold (a request of package memory) is answered by the built-in
// summariser instead, in every mode: it is counted in Folds, the fold hook
// runs, the context is checked, and the summary is returned; no script
// step is taken.
//
// Order of events in a call: the call is counted, the hook runs, the context
// is checked (a done context yields context.Cause without consuming a step),
// then the next step is taken. A step with a delay waits that long first
// (a done context ends the wait with context.Cause). A hang step blocks until ctx is done and
// yields context.Cause(ctx); an error step yields a *StepError; past the end
// of a script without Loop every call yields an error wrapping ErrExhausted.
func (m *Model) GenerateContent(ctx context.Context, req *model.LLMRequest, stream bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		yield(m.generate(ctx, req))
	}
}

func (m *Model) generate(ctx context.Context, req *model.LLMRequest) (*model.LLMResponse, error) {
	if isFold(req) {
		return m.fold(ctx, req)
	}
	m.mu.Lock()
	m.calls++
	call := m.calls
	m.mu.Unlock()

	if m.hook != nil {
		if err := m.hook(ctx, req, call); err != nil {
			return nil, err
		}
	}

	m.mu.Lock()
	if ctx.Err() != nil {
		m.mu.Unlock()
		return nil, context.Cause(ctx)
	}
	if m.behaviour == BehaviourDemo {
		m.mu.Unlock()
		return demoResponse(req, m.nextID), nil
	}
	step, index, err := m.nextStepLocked()
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}

	if step.Delay > 0 {
		t := time.NewTimer(step.Delay.D())
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		}
	}
	switch {
	case step.Hang:
		<-ctx.Done()
		return nil, context.Cause(ctx)
	case step.Error != "":
		return nil, &StepError{Model: m.key, Step: index + 1, Line: step.Line, Message: step.Error}
	default:
		return stepResponse(step, m.nextID), nil
	}
}

// fold answers a memory fold with the built-in summariser.
func (m *Model) fold(ctx context.Context, req *model.LLMRequest) (*model.LLMResponse, error) {
	m.mu.Lock()
	m.folds++
	n := m.folds
	m.mu.Unlock()
	if m.foldHook != nil {
		if err := m.foldHook(ctx, req, n); err != nil {
			return nil, err
		}
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	return foldResponse(req), nil
}

// nextStepLocked consumes the next step and returns it with its index.
func (m *Model) nextStepLocked() (config.ScriptStep, int, error) {
	if m.served >= len(m.script) && !m.loop {
		return config.ScriptStep{}, 0, fmt.Errorf("scripted model %q: %w after %d responses (set loop: true to repeat it)", m.key, ErrExhausted, m.served)
	}
	i := m.served % len(m.script)
	m.served++
	return m.script[i], i, nil
}

// nextID returns a function call ID not used before by this Model (nor, with
// overwhelming likelihood, by any other).
func (m *Model) nextID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ids++
	return fmt.Sprintf("%s%d", m.idPrefix, m.ids)
}
