package natsinbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/natsbus"
)

// Dead letters are kept (JetStream mode) in a limits-based stream over
// every agent's dead-letter subject (<prefix>.*.dlq), so a rejected or
// dropped message can be read and replayed after the fact, whoever was
// subscribed when it was rejected: DeadLetterStream is its spec,
// DeadLetters reads and replays it.

// DeadLetterStream is the spec of the dead-letter stream named name over
// the subjects' dead-letter subjects, keeping dead letters maxAge (default
// 7 days) and at most maxBytes (0: unlimited), oldest dropped first.
func DeadLetterStream(name string, subjects natsbus.Subjects, maxAge time.Duration, maxBytes int64, replicas int) natsbus.StreamSpec {
	return natsbus.StreamSpec{Name: name, Subjects: []string{subjects.DLQ("*")}, Limits: true, MaxAge: maxAge, MaxBytes: maxBytes,
		Replicas: replicas, Description: "agent-worker: dead letters (rejected and dropped input), for reading and replay"}
}

// ErrNoDeadLetter: no dead letter of the agent has that sequence (never,
// replayed already, or aged out of the stream).
var ErrNoDeadLetter = errors.New("no such dead letter")

// DeadLetter is one kept dead letter.
type DeadLetter struct {
	// Seq identifies it in the dead-letter stream (replay takes it).
	Seq   uint64 `json:"seq"`
	Agent string `json:"agent"`
	// ID is the message's id (Nats-Msg-Id), when it had one.
	ID     string    `json:"id,omitempty"`
	Reason string    `json:"reason"`
	Detail string    `json:"detail,omitempty"`
	At     time.Time `json:"at"`
	// Subject is the subject the message came on.
	Subject string `json:"subject,omitempty"`
	// Body is the message's body, its first MaxDeadLetterBody bytes;
	// Bytes its whole size.
	Body      string `json:"body"`
	Bytes     int    `json:"bytes"`
	Truncated bool   `json:"truncated,omitempty"`
}

// MaxDeadLetterBody bounds the body a listing shows of a dead letter.
const MaxDeadLetterBody = 4096

// DeadLetters reads and replays the dead-letter stream. Any replica
// answers the same: the stream is shared.
type DeadLetters struct {
	JS       jetstream.JetStream
	Stream   string
	Subjects natsbus.Subjects
}

// List returns the agent's newest limit dead letters, oldest first.
func (d DeadLetters) List(ctx context.Context, agent string, limit int) ([]DeadLetter, error) {
	s, err := d.JS.Stream(ctx, d.Stream)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream %s: %w", d.Stream, err)
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{d.Subjects.DLQ(agent)}})
	if err != nil {
		return nil, fmt.Errorf("read dead letters of %s: %w", agent, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read dead letters of %s: %w", agent, err)
	}
	var out []DeadLetter
	for left := info.NumPending; left > 0; {
		batch, err := c.Fetch(int(min(left, 256)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("read dead letters of %s: %w", agent, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			out = append(out, deadLetter(agent, meta.Sequence.Stream, meta.Timestamp, m.Headers(), m.Data()))
			if len(out) > limit {
				out = out[1:]
			}
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("read dead letters of %s: %w", agent, err)
		}
		if n == 0 {
			break
		}
		left -= uint64(n)
	}
	return out, nil
}

func deadLetter(agent string, seq uint64, at time.Time, h nats.Header, data []byte) DeadLetter {
	dl := DeadLetter{Seq: seq, Agent: agent, ID: h.Get(HeaderMessageID), Reason: h.Get(HeaderRejectReason), Detail: h.Get(HeaderRejectDetail),
		Subject: h.Get(HeaderOriginalSubject), At: at, Bytes: len(data)}
	body := string(data)
	if len(body) > MaxDeadLetterBody {
		body, dl.Truncated = textclip.Bytes(body, MaxDeadLetterBody, ""), true
	}
	dl.Body = strings.ToValidUTF8(body, "\uFFFD")
	return dl
}

// HeaderMessageID on a dead letter is the original message's
// Nats-Msg-Id (a dead letter may not carry a Nats-Msg-Id of its own:
// JetStream would take a second rejection of the same id for a
// duplicate).
const HeaderMessageID = "Agent-Worker-Message-Id"

// Replay publishes the agent's dead letter seq back to the agent's inbox
// subject (its body and its own headers, under a new message id) and then
// removes it from the stream, so a second replay of it is
// ErrNoDeadLetter: a dead letter is replayed once. It returns what was
// replayed.
func (d DeadLetters) Replay(ctx context.Context, agent string, seq uint64) (DeadLetter, error) {
	s, err := d.JS.Stream(ctx, d.Stream)
	if err != nil {
		return DeadLetter{}, fmt.Errorf("dead-letter stream %s: %w", d.Stream, err)
	}
	raw, err := s.GetMsg(ctx, seq)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return DeadLetter{}, fmt.Errorf("%w: %d of agent %s", ErrNoDeadLetter, seq, agent)
	case err != nil:
		return DeadLetter{}, fmt.Errorf("read dead letter %d: %w", seq, err)
	case raw.Subject != d.Subjects.DLQ(agent):
		return DeadLetter{}, fmt.Errorf("%w: %d of agent %s", ErrNoDeadLetter, seq, agent)
	}
	dl := deadLetter(agent, seq, raw.Time, raw.Header, raw.Data)
	out := nats.NewMsg(d.Subjects.Inbox(agent))
	for k, vs := range raw.Header {
		if !strings.HasPrefix(k, "Nats-") && !strings.HasPrefix(k, "Agent-Worker-Reject") && k != HeaderOriginalSubject && k != HeaderAgent && k != HeaderMessageID {
			out.Header[k] = vs
		}
	}
	// A new id: the original was dead-lettered, not handled, and a
	// replayed message is a new delivery; the same id for the same dead
	// letter makes a replay repeated after a crash a duplicate.
	out.Header.Set(nats.MsgIdHdr, "dlq-replay-"+d.Stream+"-"+strconv.FormatUint(seq, 10))
	out.Data = raw.Data
	if _, err := d.JS.PublishMsg(ctx, out); err != nil {
		return DeadLetter{}, fmt.Errorf("replay dead letter %d to %s: %w", seq, out.Subject, natsbus.Full(err))
	}
	if err := s.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return dl, fmt.Errorf("dead letter %d replayed, but not removed (a second replay is a duplicate within the duplicate window): %w", seq, err)
	}
	return dl, nil
}

// Stored counts the dead letters kept (every agent's).
func (d DeadLetters) Stored(ctx context.Context) (uint64, error) {
	s, err := d.JS.Stream(ctx, d.Stream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.Msgs, nil
}
