package background

import (
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/adk/model"
	"google.golang.org/adk/tool"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/seal"
	"github.com/agent-worker/agent-worker/store"
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

// Options configure a Manager. Clock, Log, Events and Charger serve both
// modes; the rest only the distributed one (JetStream set).
type Options struct {
	Clock  clock.Clock
	Log    *slog.Logger
	Events *events.Bus
	// Charger is the parents' guardrails. In distributed mode it is used
	// on the parent's owner only.
	Charger Charger

	// JetStream, when set, runs subagents as jobs any replica takes (the
	// package documentation); NATS and Store are then required. Nil:
	// local mode.
	JetStream jetstream.JetStream
	NATS      *nats.Conn
	// Store holds the registry and the charges' claimed keys.
	Store    store.Store
	Subjects natsbus.Subjects
	// Stream is the work-queue stream of jobs and charge records; default
	// "AGENTS_SUBAGENTS". DuplicateWindow is its duplicate window
	// (default 2m).
	Stream          string
	DuplicateWindow time.Duration
	// Replicas is how many copies JetStream keeps of that stream
	// (nats.replicas; natsbus.StreamSpec.Replicas). Zero creates it with
	// 1 and leaves an existing stream's count as it is.
	Replicas int
	// MaxConsumers is that stream's consumer limit
	// (natsbus.StreamSpec.MaxConsumers): it holds a charges consumer per
	// parent agent and the runners'. Zero leaves it to the server's
	// default (1,000 per stream).
	MaxConsumers int
	// Replica names this replica (its lease holder) in the registry.
	Replica string
	// MaxPerReplica is how many subagents (of any parent) this replica
	// runs at once; 0 runs none here.
	MaxPerReplica int
	// AckWait is how long a job or charge record delivered to a replica
	// that stopped answering waits before it is delivered again; default
	// 30s. Running jobs get in-progress acks every third of it.
	AckWait time.Duration
	// MaxRuns is how many times one subagent is started before it is
	// reported failed instead of run again; default 3.
	MaxRuns int
	// ReportMaxBytes bounds a report's encoded body (the binding's
	// nats.max_message_bytes); default 65536.
	ReportMaxBytes int
	// Seal is the deployment's key (package seal), shared by every
	// replica: over NATS, jobs, charge records, notices, admissions and
	// reports carry its seal, and a message of the protocol without one is
	// refused. Required with JetStream; the zero Key refuses them all.
	Seal seal.Key
}

// defaultTimeout is Spec.Timeout's default.
const defaultTimeout = 10 * time.Minute
