package natsinbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/natsbus"
)

// Input addressed to an agent that is not configured is dead-lettered
// and removed from the log. Every replica's router sees it, and each
// dead-letters it under the same key (deadLetterKey), so the dead-letter
// stream keeps it once and only the replica whose publish stored it logs
// and announces it: exactly once across replicas, within the stream's
// duplicate window (2 minutes by default).
//
// An agent one replica's file lacks may be another's: while replicas
// reload their files one by one, an agent added or removed by the reload
// is known to some and not to others. A replica dead-letters input for
// an agent only when no other replica's file has it (the binders record,
// binders.go); otherwise it leaves the input in the log for the replica
// that runs the agent, and says so once a minute per agent. Input left
// so for an agent that every replica then drops stays in the log until
// the next start, which dead-letters it.

// unknownMsg is input for an agent that is not configured: the message
// at seq on subject, or with upTo every message of subject at or below
// seq (found at the start).
type unknownMsg struct {
	subject string
	seq     uint64
	upTo    bool
}

// unknownQueue bounds the input for unknown agents waiting to be
// dead-lettered; beyond it the router drops the news (the message stays
// in the log and is found again at the next start), said in the log.
const unknownQueue = 1024

// queueUnknown hands u to the dead-lettering goroutine without blocking
// the router.
func (b *Binding) queueUnknown(u unknownMsg) {
	select {
	case b.unknown <- u:
	default:
		b.opts.Log.Warn("too much input for unknown agents at once; this message stays in the log until the next start", "subject", u.subject, "seq", u.seq)
	}
}

// leftForOther says, at most once every leftLogEvery per agent, that
// input for agent was left in the log for replica holder. Called by the
// dead-lettering goroutine only.
func (b *Binding) leftForOther(agent, holder string, u unknownMsg) {
	if b.leftSaid == nil {
		b.leftSaid = map[string]time.Time{}
	}
	now := b.opts.Clock.Now()
	if now.Sub(b.leftSaid[agent]) < leftLogEvery {
		return
	}
	b.leftSaid[agent] = now
	b.opts.Log.Info("input for an agent this replica's config does not have, but another replica's does (a reload not yet done everywhere?): left in the log for it",
		"agent", agent, "replica", holder, "subject", u.subject, "seq", u.seq)
}

// deadLetterUnknown dead-letters input for unknown agents until Stop.
func (b *Binding) deadLetterUnknown() {
	defer b.work.Done()
	for {
		select {
		case <-b.stopped:
			return
		case u := <-b.unknown:
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := b.removeUnknown(ctx, u); err != nil {
				b.opts.Log.Warn("input for an unknown agent not dead-lettered yet; it stays in the log until the next start", "subject", u.subject, "seq", u.seq, "error", err)
			}
			cancel()
		}
	}
}

// leftLogEvery is how often input left in the log for an agent another
// replica's file has is said, per agent.
const leftLogEvery = time.Minute

// removeUnknown dead-letters u's messages and deletes them from the log,
// unless another replica's file has the agent.
func (b *Binding) removeUnknown(ctx context.Context, u unknownMsg) error {
	name, _, _ := b.opts.Subjects.Agent(u.subject)
	if b.binders != nil {
		holder, err := b.binders.knownElsewhere(ctx, name)
		if err != nil {
			return err
		}
		if holder != "" {
			b.leftForOther(name, holder, u)
			return nil
		}
	}
	from := u.seq
	if u.upTo {
		from = 0
	}
	for {
		res, err := natsbus.DirectBatch(ctx, b.nc, natsbus.DirectRequest{Stream: b.opts.Stream, Filter: u.subject, From: from, Batch: 64})
		if err != nil {
			return err
		}
		for _, dm := range res.Msgs {
			if dm.Seq > u.seq {
				return nil
			}
			id := refusedID(name, dm.Header, dm.Data, b.opts.Stream, dm.Seq)
			why := &inbox.RejectError{Reason: RejectUnknownAgent, Detail: fmt.Sprintf("no agent %q is configured", name)}
			if err := b.reject(natsbus.UnknownAgent, id, dm.Subject, dm.Data, dm.Header, why, deadLetterKey(b.opts.Stream, dm.Seq, natsbus.UnknownAgent)); err != nil {
				return err
			}
			if err := b.stream.DeleteMsg(ctx, dm.Seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
				return fmt.Errorf("remove message %d from the log: %w", dm.Seq, err)
			}
			from = dm.Seq + 1
		}
		if len(res.Msgs) == 0 || res.Pending == 0 || !u.upTo {
			return nil
		}
	}
}
