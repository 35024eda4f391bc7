package background

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Subagent states, as Info.State and the registry show them. A finished
// subagent's state is its outcome (completed, failed, stopped, timeout).
const (
	// StateQueued: spawned; its job waits for a replica with room (or
	// for a run again, after the replica running it died or stopped).
	StateQueued = "queued"
	// StateRunning: a replica runs it (Info.Replica). If that replica
	// died, the state stays running until the job is delivered again,
	// after the stream's ack wait.
	StateRunning = "running"
)

// Info is one subagent as List (and GET /v1/agents/{name}/subagents)
// shows it.
type Info struct {
	ID string `json:"id"`
	// Task is the task's first TaskClip runes.
	Task string `json:"task"`
	// State is queued, running, or the outcome once finished.
	State string `json:"state"`
	// Replica names the replica (lease.holder) running it, or that ran
	// it last.
	Replica string `json:"replica,omitempty"`
	// Runs counts the times it was started: more than 1 when the replica
	// running it died or stopped and another ran it again.
	Runs     int        `json:"runs,omitempty"`
	Queued   time.Time  `json:"queued"`
	Started  *time.Time `json:"started,omitempty"`
	Finished *time.Time `json:"finished,omitempty"`
	// SpentUSD is what it cost, as charged to its parent (every run).
	SpentUSD float64 `json:"spent_usd"`
	// StopRequestedBy is set once a stop was asked for ("its parent",
	// "operator (token ops)").
	StopRequestedBy string `json:"stop_requested_by,omitempty"`
	// Key is the spawn's idempotency key (the spawning tool call's action
	// id), if any: a spawn under the same key finds this record.
	Key string `json:"key,omitempty"`
}

// Live reports whether the subagent is queued or running.
func (i Info) Live() bool { return i.State == StateQueued || i.State == StateRunning }

// TaskClip is how many runes of a task Info keeps.
const TaskClip = 200

// KeepFinished is how many finished subagents of a parent List shows, in
// either mode; live ones are always shown.
const KeepFinished = 50

// NotRunning is the error of a stop of subagent id that is not running:
// ErrFinished with its state when i, its entry, is finished, ErrUnknown
// when there is none (i nil).
func NotRunning(id string, i *Info) error {
	if i == nil {
		return fmt.Errorf("%w %q", ErrUnknown, id)
	}
	return fmt.Errorf("%w: %s %s", ErrFinished, id, i.State)
}

// sortInfos orders newest first (by queue time, then id).
func sortInfos(out []Info) {
	slices.SortFunc(out, func(a, b Info) int {
		if c := b.Queued.Compare(a.Queued); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
}
