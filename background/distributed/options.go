package distributed

import (
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/seal"
	"github.com/agent-worker/agent-worker/store"
)

// Options configure the distributed mode. JetStream, NATS, Store and Seal
// are required; the zero value of every other field is its default. The
// clock, log, charger and replica name are the background.Options the
// Manager is made with.
type Options struct {
	// JetStream holds the work-queue stream of jobs and charge records;
	// the reports go to the parents' inbox subjects through it.
	JetStream jetstream.JetStream
	// NATS carries admissions (request/reply) and notices.
	NATS *nats.Conn
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
	// replica: jobs, charge records, notices, admissions and reports carry
	// its seal, and a message of the protocol without one is refused. The
	// zero Key refuses them all.
	Seal seal.Key
}

// withDefaults fills o's zero fields with their defaults.
func (o Options) withDefaults() Options {
	if o.Stream == "" {
		o.Stream = "AGENTS_SUBAGENTS"
	}
	if o.DuplicateWindow <= 0 {
		o.DuplicateWindow = 2 * time.Minute
	}
	if o.AckWait <= 0 {
		o.AckWait = 30 * time.Second
	}
	if o.MaxRuns <= 0 {
		o.MaxRuns = 3
	}
	if o.ReportMaxBytes <= 0 {
		o.ReportMaxBytes = 64 << 10
	}
	if o.Subjects.Prefix == "" {
		o.Subjects.Prefix = "agents"
	}
	return o
}
