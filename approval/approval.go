// Package approval keeps the tool calls waiting for an operator's
// decision: a call of a tool in an agent's approval list is not run but
// held here, in the store, until an operator approves or denies it or it
// expires. One key per agent holds its pending calls, written by the
// agent's owner only, under the fence of its lease (store.Writer), so a
// request held twice (a resumed turn) is one request and a decision taken
// twice is one decision. Each write reads the book and writes it whole:
// the owner serialises its writes of one agent's book (the driver does,
// under a lock of the agent's), and the fence keeps every other replica
// out.
//
// A decision leaves a notice for the agent (Settle, Notify) that stays
// until a completed turn told it (Delivered).
//
// It stores; it must not run tools or wake agents: the driver does.
package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/store"
)

// MaxPending bounds an agent's pending approvals; Hold refuses more.
const MaxPending = 100

// Sentinel errors.
var (
	// ErrUnknown: no pending approval has that id (never held, decided, or
	// expired).
	ErrUnknown = errors.New("no pending approval with that id")
	// ErrFull: the agent has MaxPending approvals pending.
	ErrFull = errors.New("too many approvals pending")
)

// Request is a held tool call.
type Request struct {
	// ID is the call's action id (journal.ActionID): the same when a
	// resumed turn asks again.
	ID    string         `json:"id"`
	Agent string         `json:"agent"`
	Tool  string         `json:"tool"`
	Args  map[string]any `json:"args"`
	// Turn is the turn that asked.
	Turn      uint64    `json:"turn"`
	Requested time.Time `json:"requested"`
	Expires   time.Time `json:"expires"`
}

// Key is where an agent's pending approvals are stored.
func Key(agent string) string { return "agent." + agent + ".approvals" }

type book struct {
	Pending []Request `json:"pending"`
	// Notices are decisions the agent has not been told of in a
	// completed turn yet.
	Notices []Notice `json:"notices,omitempty"`
}

// Notice is a decision (approved and its result, denied, expired) the
// agent is to be told of. It stays until a turn that told it completed
// (Delivered), so the agent learns it even when the owner dies in
// between: the next owner tells it again (at least once).
//
// Its two texts are told apart: Message is the worker's and the
// operator's (who decided, why, what became of the call), Data is what
// the model and the tool wrote (the call's arguments, its result), shown
// to the model as untrusted data.
type Notice struct {
	ID      string    `json:"id"`
	Message string    `json:"message"`
	Data    string    `json:"data,omitempty"`
	At      time.Time `json:"at"`
}

// Hold stores r unless a request with its id is pending; created says
// whether it was stored now. ErrFull past MaxPending.
func Hold(ctx context.Context, st store.Store, w store.Writer, r Request) (created bool, err error) {
	err = update(ctx, st, w, r.Agent, func(b *book) (bool, error) {
		if slices.ContainsFunc(b.Pending, func(p Request) bool { return p.ID == r.ID }) {
			return false, nil
		}
		if len(b.Pending) >= MaxPending {
			return false, fmt.Errorf("%w: %d for agent %s", ErrFull, MaxPending, r.Agent)
		}
		b.Pending = append(b.Pending, r)
		created = true
		return true, nil
	})
	return created, err
}

// List returns the agent's pending approvals, oldest first.
func List(ctx context.Context, st store.Store, agent string) ([]Request, error) {
	b, err := read(ctx, st, agent)
	return b.Pending, err
}

// Settle removes the pending approval id of agent and records the notice
// notice(request) for the agent (its ID and At set to id and at), in one
// write: of several Settles of an id (serialised, as every write of a
// book is), exactly one gets the request; the others get ErrUnknown.
func Settle(ctx context.Context, st store.Store, w store.Writer, agent, id string, notice func(Request) Notice, at time.Time) (Request, error) {
	var got Request
	err := update(ctx, st, w, agent, func(b *book) (bool, error) {
		i := slices.IndexFunc(b.Pending, func(p Request) bool { return p.ID == id })
		if i < 0 {
			return false, fmt.Errorf("%w: %q of agent %s", ErrUnknown, id, agent)
		}
		got = b.Pending[i]
		b.Pending = slices.Delete(b.Pending, i, i+1)
		n := notice(got)
		n.ID, n.At = id, at
		b.Notices = append(b.Notices, n)
		return true, nil
	})
	return got, err
}

// Notify replaces the notice of n.ID (an approved call's result, once it
// ran), or records it when there is none.
func Notify(ctx context.Context, st store.Store, w store.Writer, agent string, n Notice) error {
	return update(ctx, st, w, agent, func(b *book) (bool, error) {
		if i := slices.IndexFunc(b.Notices, func(x Notice) bool { return x.ID == n.ID }); i >= 0 {
			b.Notices[i] = n
		} else {
			b.Notices = append(b.Notices, n)
		}
		return true, nil
	})
}

// Load returns the agent's pending approvals and the decisions it has not
// been told of, in one read.
func Load(ctx context.Context, st store.Store, agent string) ([]Request, []Notice, error) {
	b, err := read(ctx, st, agent)
	return b.Pending, b.Notices, err
}

// Notices returns the decisions the agent has not been told of yet.
func Notices(ctx context.Context, st store.Store, agent string) ([]Notice, error) {
	b, err := read(ctx, st, agent)
	return b.Notices, err
}

// Delivered removes the notices of ids: a completed turn told them.
func Delivered(ctx context.Context, st store.Store, w store.Writer, agent string, ids []string) error {
	return update(ctx, st, w, agent, func(b *book) (bool, error) {
		n := len(b.Notices)
		b.Notices = slices.DeleteFunc(b.Notices, func(x Notice) bool { return slices.Contains(ids, x.ID) })
		return len(b.Notices) != n, nil
	})
}

func read(ctx context.Context, st store.Store, agent string) (book, error) {
	var b book
	if _, err := store.GetJSON(ctx, st, Key(agent), &b); err != nil {
		return b, fmt.Errorf("read pending approvals of %s: %w", agent, err)
	}
	return b, nil
}

// update applies fn to the agent's book as st holds it and, if fn says
// so, writes the result through w (under its fence).
func update(ctx context.Context, st store.Store, w store.Writer, agent string, fn func(*book) (bool, error)) error {
	b, err := read(ctx, st, agent)
	if err != nil {
		return err
	}
	write, err := fn(&b)
	if err != nil || !write {
		return err
	}
	data, err := json.Marshal(&b)
	if err == nil {
		_, err = w.Put(ctx, Key(agent), data)
	}
	if err != nil {
		return fmt.Errorf("write pending approvals of %s: %w", agent, err)
	}
	return nil
}

// Describe renders a request for the log and events: tool and
// arguments, clipped. The arguments are the model's: not for trusted text.
func Describe(r Request) string {
	return r.Tool + " " + Arguments(r)
}

// Arguments renders a request's arguments as JSON, clipped to 500 bytes.
func Arguments(r Request) string {
	args, _ := json.Marshal(r.Args)
	return textclip.Bytes(strings.TrimSpace(string(args)), 500, "…")
}
