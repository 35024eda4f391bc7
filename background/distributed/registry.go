package distributed

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/agent-worker/agent-worker/background"
	"github.com/agent-worker/agent-worker/store"
)

// registry is a parent's subagents, under the store key
// subagents.<parent>: the id sequence and one record per subagent. It is
// written with compare-and-set by the parent's owner (spawn, stop, spend)
// and by the replicas running its subagents (start, finish).
type registry struct {
	Seq  int                         `json:"seq"`
	Subs map[string]*background.Info `json:"subagents"`
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
		if s.State == background.StateRunning {
			n++
		}
	}
	return n
}

// byKey returns the record spawned under key ("": none).
func (g *registry) byKey(key string) *background.Info {
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

// prune forgets the oldest finished subagents beyond background.KeepFinished.
func (g *registry) prune() {
	var done []*background.Info
	for _, s := range g.Subs {
		if !s.Live() {
			done = append(done, s)
		}
	}
	if len(done) <= background.KeepFinished {
		return
	}
	slices.SortFunc(done, func(a, b *background.Info) int { return finishedAt(a).Compare(finishedAt(b)) })
	for _, s := range done[:len(done)-background.KeepFinished] {
		delete(g.Subs, s.ID)
	}
}

func finishedAt(i *background.Info) time.Time {
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
		g.Subs = map[string]*background.Info{}
	}
	return g, nil
}

// update applies fn to parent's registry and writes it with
// compare-and-set, retrying on a concurrent write. fn's error (other than
// errNoChange) is returned and nothing is written.
func (r registryStore) update(ctx context.Context, parent string, fn func(*registry) error) error {
	return store.UpdateJSON(ctx, r.st, registryKey(parent), func(g *registry) (bool, error) {
		if g.Subs == nil {
			g.Subs = map[string]*background.Info{}
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

// list returns parent's subagents, in no particular order.
func (g *registry) list() []background.Info {
	out := make([]background.Info, 0, len(g.Subs))
	for _, s := range g.Subs {
		out = append(out, *s)
	}
	return out
}
