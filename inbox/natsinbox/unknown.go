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

// removeUnknown dead-letters u's messages and deletes them from the log.
func (b *Binding) removeUnknown(ctx context.Context, u unknownMsg) error {
	name, _, _ := b.opts.Subjects.Agent(u.subject)
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
