package natsbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// DirectRequest asks a stream with allow_direct for a run of its
// messages: those whose subject matches Filter, from sequence From on,
// oldest first.
type DirectRequest struct {
	// Stream is the stream's name.
	Stream string
	// Filter is a subject or a pattern with wildcards; "" matches every
	// subject.
	Filter string
	// From is the first sequence looked at (0 and 1: the stream's start).
	From uint64
	// Batch bounds how many messages one request returns (at least 1).
	Batch int
	// MaxBytes bounds the bytes one request returns (subjects, headers
	// and bodies; the message that crosses it is still returned). Zero:
	// the server's own bound (its max_pending, 64 MiB by default).
	MaxBytes int
}

// DirectMsg is one message a direct get returned.
type DirectMsg struct {
	Subject string
	Seq     uint64
	Time    time.Time
	// Header holds the message's own headers (nil when it had none),
	// without the ones the direct get added.
	Header nats.Header
	Data   []byte
}

// DirectResult is what one DirectBatch returned.
type DirectResult struct {
	// Msgs are the matching messages, oldest first.
	Msgs []DirectMsg
	// Pending counts the matching messages after the last one returned
	// (after From, when none was): how many a next request would find.
	Pending uint64
}

// ErrNoDirect: no server answered the direct get — the stream does not
// exist or has allow_direct off.
var ErrNoDirect = errors.New("no server answers direct gets for the stream (is allow_direct set?)")

// directHeaders are the headers a direct get adds to each message; the
// rest are the message's own.
var directHeaders = []string{"Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp", "Nats-Num-Pending", "Nats-Last-Sequence"}

// DirectBatch reads one run of messages with a single request to
// $JS.API.DIRECT.GET.<stream> (batch direct get, nats-server 2.11 and
// later; nats.go has no wrapper): any server holding a copy of the stream
// may answer, so on a clustered stream a lagging follower may return
// fewer messages than the leader holds — a caller that knows a sequence
// exists reads again until it has it. The answer ends with an
// end-of-batch status that carries Pending. A stream with no matching
// message at or after From returns an empty result.
func DirectBatch(ctx context.Context, nc *nats.Conn, req DirectRequest) (DirectResult, error) {
	body := struct {
		Seq      uint64 `json:"seq,omitempty"`
		NextFor  string `json:"next_by_subj,omitempty"`
		Batch    int    `json:"batch"`
		MaxBytes int    `json:"max_bytes,omitempty"`
	}{Seq: req.From, NextFor: req.Filter, Batch: max(req.Batch, 1), MaxBytes: req.MaxBytes}
	if body.NextFor == "" {
		body.NextFor = ">"
	}
	if body.Seq == 0 {
		body.Seq = 1
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return DirectResult{}, err
	}
	// A channel just large enough for the answer (the batch and its end),
	// not a subscription's default of 65,536 slots: a read per turn would
	// allocate half a megabyte for a few messages.
	inbox := nc.NewRespInbox()
	ch := make(chan *nats.Msg, body.Batch+2)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return DirectResult{}, fmt.Errorf("direct get from %s: %w", req.Stream, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+req.Stream, inbox, raw); err != nil {
		return DirectResult{}, fmt.Errorf("direct get from %s: %w", req.Stream, err)
	}
	var out DirectResult
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			return DirectResult{}, fmt.Errorf("direct get from %s (%s after %d): %w", req.Stream, body.NextFor, body.Seq, ctx.Err())
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "204": // end of batch
			out.Pending, _ = strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			return out, nil
		case "404": // nothing matches at or after From
			return out, nil
		case "503": // no responders: no stream, or no direct gets
			return DirectResult{}, fmt.Errorf("direct get from %s: %w", req.Stream, ErrNoDirect)
		default:
			return DirectResult{}, fmt.Errorf("direct get from %s: status %s %s", req.Stream, status, m.Header.Get("Description"))
		}
		dm, err := directMsg(m)
		if err != nil {
			return DirectResult{}, fmt.Errorf("direct get from %s: %w", req.Stream, err)
		}
		out.Msgs = append(out.Msgs, dm)
	}
}

// directMsg is m, one message of a direct get's answer, with the
// headers the server added taken out.
func directMsg(m *nats.Msg) (DirectMsg, error) {
	h := m.Header
	seq, err := strconv.ParseUint(h.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		return DirectMsg{}, fmt.Errorf("a message without its sequence (%q)", h.Get("Nats-Sequence"))
	}
	dm := DirectMsg{Subject: h.Get("Nats-Subject"), Seq: seq, Data: m.Data}
	dm.Time, _ = time.Parse(time.RFC3339Nano, h.Get("Nats-Time-Stamp"))
	for _, k := range directHeaders {
		delete(h, k)
	}
	if len(h) > 0 {
		dm.Header = h
	}
	return dm, nil
}
