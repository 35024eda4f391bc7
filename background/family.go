package background

import (
	"context"
	"sync"
	"time"

	"github.com/agent-worker/agent-worker/internal/textclip"
)

type family struct {
	name    string
	parent  Parent
	spec    Spec
	running map[string]*sub // running in this process
	spawnMu sync.Mutex      // one spawn at a time (distributed: read cap, queue)
	// keyed maps the newest keyedKeep spawn keys to their subagents' ids
	// (local mode; under Manager.mu), in order in keys.
	keyed map[string]string
	keys  []string
}

// keyedKeep bounds how many spawn keys a local parent remembers.
const keyedKeep = 256

// remember records that key spawned id.
func (f *family) remember(key, id string) {
	if f.keyed == nil {
		f.keyed = map[string]string{}
	}
	f.keyed[key] = id
	f.keys = append(f.keys, key)
	if len(f.keys) > keyedKeep {
		delete(f.keyed, f.keys[0])
		f.keys = f.keys[1:]
	}
}

type sub struct {
	id      string
	task    string
	cancel  context.CancelCauseFunc
	spent   float64 // this run's spend
	prior   float64 // earlier runs' spend (distributed)
	calls   int     // model responses charged in this run
	run     int     // this run's number, from 1
	queued  time.Time
	started time.Time
	stopBy  string // local: who asked it to stop
	job     Job    // distributed: the queue's side of this run; nil in local mode
	// link is the spawning turn's traceparent; trace the run's own, once
	// it started (its report carries it, so the parent's turn links back).
	link, trace string
}

func (s *sub) info(replica, state string) Info {
	started := s.started
	return Info{ID: s.id, Task: textclip.Runes(s.task, TaskClip, "…"), State: state, Replica: replica, Runs: max(s.run, 1),
		Queued: s.queued, Started: &started, SpentUSD: s.prior + s.spent, StopRequestedBy: s.stopBy}
}
