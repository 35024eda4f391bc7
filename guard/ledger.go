package guard

import (
	"sync"
	"time"
)

// state is what an agent keeps in the store under guard.<agent>.
type state struct {
	SessionSpent float64 `json:"session_spent_usd"`
	SessionAdded float64 `json:"session_added_usd"`
	Day          string  `json:"day"`
	DaySpent     float64 `json:"day_spent_usd"`
	DayAdded     float64 `json:"day_added_usd"`
	Trip         *Trip   `json:"trip,omitempty"`
}

// workerState is the worker-wide daily ledger, under guard._worker.
type workerState struct {
	Day   string  `json:"day"`
	Spent float64 `json:"spent_usd"`
	Added float64 `json:"added_usd"`
	Trip  *Trip   `json:"trip,omitempty"`
}

type ledger struct {
	// Set by AddAgent, never changed after.
	name   string
	model  string
	price  Price
	priced bool
	limits Limits

	// mu guards everything below. It is the agent's own lock: charging
	// one agent never waits for another, except for the few instructions
	// under Guard.wmu that update the worker-wide ledger.
	mu       sync.Mutex
	st       state
	restored bool
	// dropped: a change was not written because this replica did not
	// own the agent then (writer); Keep writes it once it does again.
	dropped bool

	inTurn     bool
	turnSpent  float64
	modelCalls int
	toolCalls  int
	tokens     int
	tokensIn   int
	tokensOut  int
	responses  int   // completed model responses charged this turn
	stopped    error // the cap that stopped this turn

	// after holds calls into agents (halt, note, reopen) decided under mu
	// and made once it is released: the driver calls the guard while
	// holding an agent's lock, so the guard must never call an agent
	// while holding its own.
	after []call

	// Durable writes (see flush). ver counts changes of st; saved is the
	// newest ver stored. wneed is the worker-ledger version this agent's
	// changes need stored. At most one write of the agent's ledger is in
	// flight (writing); done is closed when it ends.
	ver, saved uint64
	wneed      uint64
	writing    bool
	done       chan struct{}
	failing    bool          // the last write failed; retried until it succeeds
	retrying   bool          // a retry is scheduled
	backoff    time.Duration // the next retry's delay
}

func agentKey(agent string) string { return "guard." + agent }

const workerKey = "guard._worker"
