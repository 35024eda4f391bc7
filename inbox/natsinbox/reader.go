package natsinbox

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/natsbus"
)

// lagRetry is how soon a read that came back behind a sequence the router
// saw is made again; maxLags how many such reads in a row are made before
// the sequence is taken as gone (removed by max_age or by hand).
const (
	lagRetry = 20 * time.Millisecond
	maxLags  = 100
)

// Read returns the agent's messages after from, per input, oldest first:
// at most room of each kind, wake inputs first, the room shared between
// the inputs of a kind that have news. An input is read only when the
// router (or the start) saw a message on it beyond from, so an agent with
// nothing new costs no request. One batch direct get per input read.
//
// A body the worker cannot use is dead-lettered here (with its reason,
// logged, counted, announced) and counted in Rejected: Through passes it.
// Read never holds what it returned: the messages stay in the log until
// the agent's cursors pass them.
func (b *Binding) Read(ctx context.Context, agent string, from inbox.Cursors, room inbox.Room) (inbox.LogRead, error) {
	out := inbox.LogRead{Through: inbox.Cursors{}}
	a := b.agent(agent)
	if a == nil || b.stream == nil {
		return out, nil
	}
	// A subscribe: subject bound by a reload is read from its since on
	// (binders.go): Through then carries the cursor past what came before.
	for _, in := range a.inputs[2:] {
		if s := in.since.Load(); s > from[in.key] {
			from = maps.Clone(from)
			if from == nil {
				from = inbox.Cursors{}
			}
			from[in.key] = s
		}
	}
	for _, kind := range []inbox.Kind{inbox.Wake, inbox.Deferred} {
		left := room.Wake
		if kind == inbox.Deferred {
			left = room.Deferred
		}
		var news []*input
		for _, in := range a.inputs {
			if in.kind == kind && max(in.seen.Load(), in.hint.Load()) > from[in.key] {
				news = append(news, in)
			}
		}
		for i, in := range news {
			if left <= 0 {
				out.Waiting += int(max(in.pending.Load(), 1))
				continue
			}
			share := (left + len(news) - i - 1) / (len(news) - i)
			n, err := b.readInput(ctx, a, in, from[in.key], share, &out)
			if err != nil {
				return out, err
			}
			left -= n
		}
	}
	return out, nil
}

// readInput reads up to n messages of in after from into out, and
// returns how many it added: from the window when it holds all of them,
// else with a batch direct get.
func (b *Binding) readInput(ctx context.Context, a *agentLog, in *input, from uint64, n int, out *inbox.LogRead) (int, error) {
	seen, hint := in.seen.Load(), in.hint.Load()
	msgs, pending, top, fromWindow := b.win.read(in, from, n)
	if fromWindow {
		b.reads.window.Add(1)
	} else {
		b.reads.stream.Add(1)
		res, err := natsbus.DirectBatch(ctx, b.nc, natsbus.DirectRequest{Stream: b.opts.Stream, Filter: in.key, From: from + 1, Batch: n})
		if err != nil {
			return 0, fmt.Errorf("read %s of agent %s after %d: %w", in.key, a.name, from, err)
		}
		msgs, pending = res.Msgs, res.Pending
	}
	through, added, err := b.take(a, in, from, msgs, out)
	if err != nil {
		return 0, err
	}
	in.pending.Store(pending)
	out.Waiting += int(pending)
	switch {
	case pending > 0:
	case fromWindow:
		through = max(through, top) // the window holds all there is
	default:
		// The whole input was read: through reaches what the router saw,
		// unless the copy of the stream that answered is behind it (read
		// again soon) — or, after many reads, the message is gone.
		caughtUp := seen <= through
		if !caughtUp && in.lags.Add(1) <= maxLags {
			out.RetryIn = lagRetry
		} else {
			if !caughtUp {
				b.opts.Log.Warn("a message the router saw is not in the log; taken as removed (max_age, or a purge by hand)",
					"agent", a.name, "input", in.key, "seq", seen, "read_through", through)
			}
			in.lags.Store(0)
			in.hint.CompareAndSwap(hint, 0)
			through = max(through, seen)
		}
	}
	if through > from {
		out.Through[in.key] = through
	}
	return added, nil
}

// take adds the messages read from in after from to out, dead-lettering
// those whose body cannot be used, and returns the last sequence read
// (from if none) and how many it added.
func (b *Binding) take(a *agentLog, in *input, from uint64, msgs []natsbus.DirectMsg, out *inbox.LogRead) (uint64, int, error) {
	through, added := from, 0
	for _, dm := range msgs {
		through = dm.Seq
		if b.opts.DuplicateWindow > 0 && dm.Header.Get(nats.MsgIdHdr) != "" {
			// The router may not have seen it (it waited at the start, or
			// this read got ahead of the router): held for its window.
			in.ids.add(dm.Seq, dm.Time)
		}
		m, err := b.message(a, in, dm)
		if err != nil {
			if err := b.refuse(a.name, dm, err); err != nil {
				return 0, 0, fmt.Errorf("dead-letter message %d of %s: %w", dm.Seq, a.name, err)
			}
			out.Rejected++
			continue
		}
		out.Messages = append(out.Messages, m)
		added++
	}
	return through, added, nil
}

// message turns dm, read from in, into an inbox message, or says why its
// body cannot be used.
func (b *Binding) message(a *agentLog, in *input, dm natsbus.DirectMsg) (inbox.Message, error) {
	body, err := inbox.ParseBody(dm.Data, b.opts.MaxBytes)
	if err != nil {
		return inbox.Message{}, err
	}
	h := dm.Header
	if h == nil {
		h = nats.Header{}
	}
	id := messageID(a.name, h, body, b.opts.Stream, dm.Seq)
	via, sender := b.claims(a.name, dm.Subject, h, dm.Data)
	return inbox.Message{
		ID: id, Kind: in.kind, Source: source(dm.Subject, via, id), Via: via, Sender: sender, From: body.From,
		Text: body.Text, Attributes: body.Attributes, Received: dm.Time,
		Pos: inbox.Position{Input: in.key, Seq: dm.Seq}, TraceParent: traceParent(h),
	}, nil
}

// messageID returns the idempotency key agent knows the message by: its
// Nats-Msg-Id (the envelope's id when the Nats-Msg-Id is natsbus.MsgID of
// it: ids are per agent), else the envelope's id, else
// "<stream>-seq-<n>".
func messageID(agent string, h nats.Header, body inbox.Body, stream string, seq uint64) string {
	if id := natsbus.PlainMsgID(agent, h.Get(nats.MsgIdHdr), body.ID); id != "" {
		return id
	}
	if body.ID != "" {
		return body.ID
	}
	return stream + "-seq-" + strconv.FormatUint(seq, 10)
}

// refusedID is the id agent knows a message whose body was refused by, as
// far as it can be told: messageID's, with the "id" of a JSON object body
// that has one as the envelope's id.
func refusedID(agent string, h nats.Header, data []byte, stream string, seq uint64) string {
	var env struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(data, &env) != nil {
		env.ID = ""
	}
	if h == nil {
		h = nats.Header{}
	}
	return messageID(agent, h, inbox.Body{ID: strings.TrimSpace(env.ID)}, stream, seq)
}
