package natsinbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/agent-worker/agent-worker/store"
)

// The binders record is what the replicas share about subscribe:
// bindings, in one store key (BindersKey), written with compare-and-set:
//
//   - since: for each (subject, agent) ever bound, the stream sequence
//     the agent's reading of the subject starts after when its stored
//     cursor is below it. A reload that binds a subject to an agent that
//     no live replica binds it to sets it to the stream's last sequence:
//     a new binding gets the messages that arrive after the reload, not
//     the backlog other agents left in the log. A binding older than the
//     record (the first start that writes it) has 0: it reads from its
//     cursor, as before. A start never moves a since, so a restart resumes
//     a binding from the agent's stored cursor.
//   - holders: for each replica, the bindings its config file has (during
//     a reload: those of the old and the new file), and the agents it has
//     (likewise: both files'), so that a replica whose file lacks an
//     agent leaves the agent's input in the log while another replica's
//     file has it (unknown.go), instead of dead-lettering it. A replica's purger
//     holds a shared subject back for the bindings other replicas' files
//     have and its own does not — max(that agent's cursor copy, since) —
//     so while the replicas' files disagree none purges what another's
//     agents still need. A replica's section is dropped by the next write
//     of another once that replica is not live (Options.Live) and its
//     section is older than holderGrace.
//
// A purge reads the record from the store each time (one read per purge
// round of an agent with subscribe: subjects), after it took the agent's
// own cursors: a message those cover was published after every binding
// recorded before, so it sees them all. A new binding's since is taken
// again after the record is written (Prepare), so a message a replica
// may have purged before reading the record is never one the binding
// starts before.
//
// Since entries are never removed: one number per (subject, agent) ever
// configured.

// BindersKey is the store key of the binders record.
const BindersKey = "logbinders"

// holderGrace is how old a section of a replica that is not live must be
// before another replica drops it: a starting replica writes its section
// before its liveness record exists.
const holderGrace = time.Minute

// bindersRecord is the stored form.
type bindersRecord struct {
	// Since maps subject → agent → sequence.
	Since map[string]map[string]uint64 `json:"since"`
	// Holders maps replica → its section.
	Holders map[string]holderSection `json:"holders"`
}

// holderSection is one replica's bindings: subject → agents, and the
// names of the agents its file has.
type holderSection struct {
	At     time.Time           `json:"at"`
	Binds  map[string][]string `json:"binds"`
	Agents []string            `json:"agents,omitempty"`
}

// Bindings are subscribe: bindings: subject → agents.
type Bindings map[string][]string

// add adds agent's binding of subject.
func (bs Bindings) add(subject, agent string) {
	if !slices.Contains(bs[subject], agent) {
		bs[subject] = append(bs[subject], agent)
		slices.Sort(bs[subject])
	}
}

// has reports whether agent binds subject.
func (bs Bindings) has(subject, agent string) bool { return slices.Contains(bs[subject], agent) }

// AgentBindings are the subscribe: bindings of agents.
func AgentBindings(agents []Agent) Bindings {
	out := Bindings{}
	for _, a := range agents {
		for _, s := range a.Subscribe {
			out.add(s.Subject, a.Name)
		}
	}
	return out
}

// binders reads and writes the record for one replica.
type binders struct {
	st     store.Store
	holder string
	live   func(ctx context.Context, holder string) (bool, error)
	log    *slog.Logger
	clock  func() time.Time

	mu  sync.Mutex
	rec bindersRecord // as last read or written
	rev uint64        // its store revision: an older read never replaces it
}

// keep makes rec (at store revision rev) the copy since answers from,
// unless the copy is newer: a read that raced a write (others, on a
// purger's goroutine, against placed) must not bring back a record
// without the bindings the write started.
func (b *binders) keep(rec bindersRecord, rev uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rev < b.rev {
		return
	}
	b.rec, b.rev = rec, rev
}

func newBinders(st store.Store, holder string, live func(context.Context, string) (bool, error), log *slog.Logger, now func() time.Time) *binders {
	if holder == "" {
		holder = "default"
	}
	return &binders{st: st, holder: holder, live: live, log: log, clock: now}
}

// update applies f to the stored record (fresh: no record yet) and
// writes it with compare-and-set, trying again on a conflict.
func (b *binders) update(ctx context.Context, f func(rec *bindersRecord, fresh bool)) error {
	for range 20 {
		var rec bindersRecord
		e, err := b.st.Get(ctx, BindersKey)
		fresh := errors.Is(err, store.ErrNotFound)
		switch {
		case fresh:
		case err != nil:
			return fmt.Errorf("read %s: %w", BindersKey, err)
		default:
			if err := json.Unmarshal(e.Value, &rec); err != nil {
				return fmt.Errorf("read %s: %w", BindersKey, err)
			}
		}
		if rec.Since == nil {
			rec.Since = map[string]map[string]uint64{}
		}
		if rec.Holders == nil {
			rec.Holders = map[string]holderSection{}
		}
		f(&rec, fresh)
		b.prune(ctx, &rec)
		raw, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		var rev uint64
		if fresh {
			rev, err = b.st.Create(ctx, BindersKey, raw, 0)
		} else {
			rev, err = b.st.Update(ctx, BindersKey, raw, e.Revision)
		}
		if errors.Is(err, store.ErrExists) || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			continue // another replica wrote it meanwhile
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", BindersKey, err)
		}
		b.keep(rec, rev)
		return nil
	}
	return fmt.Errorf("write %s: too many concurrent writers", BindersKey)
}

// prune drops the sections of replicas that are not live and have not
// written for holderGrace. A failed liveness check keeps the section.
func (b *binders) prune(ctx context.Context, rec *bindersRecord) {
	if b.live == nil {
		return
	}
	for h, s := range rec.Holders {
		if h == b.holder || b.clock().Sub(s.At) < holderGrace {
			continue
		}
		if live, err := b.live(ctx, h); err == nil && !live {
			delete(rec.Holders, h)
			b.log.Info("a replica that is gone no longer holds subscribe: subjects back", "replica", h, "bindings", s.Binds)
		}
	}
}

// started records this replica's bindings at start: a binding the
// record has keeps its since; one it lacks starts after last — or at
// its cursor (0) when there is no record yet (the first start that
// keeps one: every binding is older than it).
func (b *binders) started(ctx context.Context, mine Bindings, agents []string, last uint64) error {
	return b.update(ctx, func(rec *bindersRecord, fresh bool) {
		for subj, agents := range mine {
			for _, a := range agents {
				if _, ok := rec.Since[subj][a]; ok {
					continue
				}
				if fresh {
					setSince(rec, subj, a, 0)
				} else {
					setSince(rec, subj, a, last)
				}
			}
		}
		rec.Holders[b.holder] = holderSection{At: b.clock(), Binds: mine, Agents: agents}
	})
}

// placed records, before a reload applies, the bindings of both files
// (old and next) as this replica's, and starts each binding next adds
// that no live replica has after last. It returns the bindings it
// started anew.
func (b *binders) placed(ctx context.Context, old, next Bindings, agents []string, last uint64) (Bindings, error) {
	var fresh Bindings
	err := b.update(ctx, func(rec *bindersRecord, _ bool) {
		fresh = Bindings{}
		both := Bindings{}
		for _, bs := range []Bindings{old, next} {
			for subj, agents := range bs {
				for _, a := range agents {
					both.add(subj, a)
				}
			}
		}
		for subj, agents := range next {
			for _, a := range agents {
				if old.has(subj, a) || b.boundElsewhere(rec, subj, a) {
					continue
				}
				setSince(rec, subj, a, last)
				fresh.add(subj, a)
			}
		}
		rec.Holders[b.holder] = holderSection{At: b.clock(), Binds: both, Agents: agents}
	})
	return fresh, err
}

// restart moves the since of the bindings in fresh that placed started
// after was to after now (see Prepare): a message between the two may
// have been purged by a replica that had not read the record yet.
func (b *binders) restart(ctx context.Context, fresh Bindings, was, now uint64) error {
	return b.update(ctx, func(rec *bindersRecord, _ bool) {
		for subj, agents := range fresh {
			for _, a := range agents {
				if rec.Since[subj][a] == was {
					setSince(rec, subj, a, now)
				}
			}
		}
	})
}

// settled records the bindings in force after a reload as this
// replica's.
func (b *binders) settled(ctx context.Context, mine Bindings, agents []string) error {
	return b.update(ctx, func(rec *bindersRecord, _ bool) {
		rec.Holders[b.holder] = holderSection{At: b.clock(), Binds: mine, Agents: agents}
	})
}

// knownElsewhere returns a replica other than this one whose file has
// agent, read from the store now; "" when none has. A section of a
// replica that is not live counts only while it is younger than
// holderGrace (it is starting), as prune keeps it.
func (b *binders) knownElsewhere(ctx context.Context, agent string) (string, error) {
	var rec bindersRecord
	if _, err := store.GetJSON(ctx, b.st, BindersKey, &rec); err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("read %s: %w", BindersKey, err)
	}
	for _, h := range slices.Sorted(maps.Keys(rec.Holders)) {
		s := rec.Holders[h]
		if h == b.holder || !slices.Contains(s.Agents, agent) {
			continue
		}
		if b.live != nil && b.clock().Sub(s.At) >= holderGrace {
			if live, err := b.live(ctx, h); err == nil && !live {
				continue
			}
		}
		return h, nil
	}
	return "", nil
}

// boundElsewhere reports whether another replica's section has agent
// bind subj.
func (b *binders) boundElsewhere(rec *bindersRecord, subj, agent string) bool {
	for h, s := range rec.Holders {
		if h != b.holder && Bindings(s.Binds).has(subj, agent) {
			return true
		}
	}
	return false
}

func setSince(rec *bindersRecord, subj, agent string, seq uint64) {
	if rec.Since[subj] == nil {
		rec.Since[subj] = map[string]uint64{}
	}
	rec.Since[subj][agent] = seq
}

// since returns where agent's reading of subj starts, as last read or
// written here.
func (b *binders) since(subj, agent string) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rec.Since[subj][agent]
}

// foreignBinder is a binding another replica's file has and this one's
// does not.
type foreignBinder struct {
	subject, agent, holder string
	since                  uint64
}

// others returns the bindings of other replicas' sections that local
// (this replica's roster) lacks, read from the store now: a purge must
// see every binding recorded before the cursors it purges by were read.
// On an error the caller must purge no shared subject.
func (b *binders) others(ctx context.Context, local func(subj, agent string) bool) ([]foreignBinder, error) {
	var rec bindersRecord
	e, err := b.st.Get(ctx, BindersKey)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", BindersKey, err)
	default:
		if err := json.Unmarshal(e.Value, &rec); err != nil {
			return nil, fmt.Errorf("read %s: %w", BindersKey, err)
		}
		b.keep(rec, e.Revision)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []foreignBinder
	for _, h := range slices.Sorted(maps.Keys(b.rec.Holders)) {
		if h == b.holder {
			continue
		}
		for subj, agents := range b.rec.Holders[h].Binds {
			for _, a := range agents {
				if !local(subj, a) {
					out = append(out, foreignBinder{subject: subj, agent: a, holder: h, since: b.rec.Since[subj][a]})
				}
			}
		}
	}
	return out, nil
}
