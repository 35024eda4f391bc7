package background

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/agent-worker/agent-worker/store"
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

// keepFinished is how many finished subagents a parent's registry keeps
// for listing; live ones are always kept.
const keepFinished = 50

// registry is a parent's subagents, under the store key
// subagents.<parent>: the id sequence and one record per subagent. It is
// written with compare-and-set by the parent's owner (spawn, stop, spend)
// and by the replicas running its subagents (start, finish).
type registry struct {
	Seq  int              `json:"seq"`
	Subs map[string]*Info `json:"subagents"`
}

func registryKey(parent string) string { return "subagents." + parent }

// live counts the queued and running subagents.
func (g *registry) live() int {
	n := 0
	for _, s := range g.Subs {
		if s.Live() {
			n++
		}
	}
	return n
}

// running counts the subagents some replica runs (or ran, until a dead
// replica's job is delivered again).
func (g *registry) running() int {
	n := 0
	for _, s := range g.Subs {
		if s.State == StateRunning {
			n++
		}
	}
	return n
}

// prune forgets the oldest finished subagents beyond keepFinished.
// byKey returns the record spawned under key ("": none).
func (g *registry) byKey(key string) *Info {
	if key == "" {
		return nil
	}
	for _, i := range g.Subs {
		if i.Key == key {
			return i
		}
	}
	return nil
}

func (g *registry) prune() {
	var done []*Info
	for _, s := range g.Subs {
		if !s.Live() {
			done = append(done, s)
		}
	}
	if len(done) <= keepFinished {
		return
	}
	slices.SortFunc(done, func(a, b *Info) int { return finishedAt(a).Compare(finishedAt(b)) })
	for _, s := range done[:len(done)-keepFinished] {
		delete(g.Subs, s.ID)
	}
}

func finishedAt(i *Info) time.Time {
	if i.Finished != nil {
		return *i.Finished
	}
	return i.Queued
}

// errNoChange, returned by an update function, ends the update without
// writing.
var errNoChange = errors.New("no change")

// registryStore reads and writes parents' registries.
type registryStore struct{ st store.Store }

// get reads parent's registry (empty when there is none).
func (r registryStore) get(ctx context.Context, parent string) (*registry, error) {
	g := &registry{}
	if _, err := store.GetJSON(ctx, r.st, registryKey(parent), g); err != nil {
		return nil, err
	}
	if g.Subs == nil {
		g.Subs = map[string]*Info{}
	}
	return g, nil
}

// update applies fn to parent's registry and writes it with
// compare-and-set, retrying on a concurrent write. fn's error (other than
// errNoChange) is returned and nothing is written.
func (r registryStore) update(ctx context.Context, parent string, fn func(*registry) error) error {
	return store.UpdateJSON(ctx, r.st, registryKey(parent), func(g *registry) (bool, error) {
		if g.Subs == nil {
			g.Subs = map[string]*Info{}
		}
		if err := fn(g); err != nil {
			if errors.Is(err, errNoChange) {
				return false, nil
			}
			return false, err
		}
		g.prune()
		return true, nil
	})
}

// list returns parent's subagents, newest first.
func (g *registry) list() []Info {
	out := make([]Info, 0, len(g.Subs))
	for _, s := range g.Subs {
		out = append(out, *s)
	}
	sortInfos(out)
	return out
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
