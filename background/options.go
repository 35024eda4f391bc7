package background

import (
	"log/slog"
	"time"

	"google.golang.org/adk/model"
	"google.golang.org/adk/tool"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
)

// Spec is how one parent's subagents run.
type Spec struct {
	// Max is how many may be in flight (queued or running, anywhere) at
	// once (default 3).
	Max int
	// BudgetUSD stops one subagent at this cost (all its runs); 0 = none.
	BudgetUSD float64
	// Timeout stops one run of a subagent that runs longer (default 10m).
	Timeout time.Duration
	// Instruction precedes every task.
	Instruction string
	// Model returns a fresh model instance for one subagent.
	Model func() (model.LLM, error)
	// Price prices the model's usage; Priced false means $0.
	Price  guard.Price
	Priced bool
	// Tools returns the subagent's tools (never spawn_subagent).
	Tools func() ([]tool.Tool, error)
}

// Options configure a Manager. The zero value runs subagents locally,
// with the real clock, no log, no events and no guardrails.
type Options struct {
	Clock  clock.Clock
	Log    *slog.Logger
	Events *events.Bus
	// Charger is the parents' guardrails. In distributed mode it is used
	// on the parent's owner only.
	Charger Charger
	// Replica names this replica (its lease holder) in Info.Replica.
	Replica string
	// Distributed, when set, runs subagents as jobs any replica takes:
	// New calls it once with the Manager's Host and these Options (the
	// zero Clock and Log filled in). Package background/distributed's
	// New returns one. Nil: local mode.
	Distributed func(Host, Options) Distributed
}

// defaultTimeout is Spec.Timeout's default.
const defaultTimeout = 10 * time.Minute
