package natsinbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/store"
)

// Before the log, each agent had two durable consumers on the input
// stream — "agent-<name>" over its inbox and wake subscribe: subjects,
// "deferred-<name>" over its deferred ones — and the stream had interest
// retention; one more consumer, "unknown-agents", dead-lettered input for
// agents not configured. Upgrade converts such a stream in place.

// Durable consumer names of the layout before the log.
const (
	oldWakePrefix     = "agent-"
	oldDeferredPrefix = "deferred-"
	oldUnknown        = "unknown-agents"
)

// Upgrade converts the input stream named stream from the layout before
// the log, without losing or repeating a message: each configured agent's
// first cursors come from its consumers' ack floors (every message at or
// below a floor was handled or dead-lettered), stored under
// inbox.CursorsKey ("agent.<name>.cursors") where they are
// further than what is stored; then the stream becomes limits-based, and
// only then are the old consumers deleted (on an interest stream,
// deleting them would remove the messages they hold). A crash part-way is
// finished by the next start. A stream that is missing, not
// agent-worker's, or already converted without old consumers is left as
// it is. It reports what it did in log.
//
// Not guaranteed: a message on a subject several agents bind that one of
// them had acknowledged out of order, above its floor, is handled by that
// agent once more. All replicas of the older version must be stopped
// first: one still consuming would handle messages the new cursors do not
// cover.
func Upgrade(ctx context.Context, js jetstream.JetStream, stream string, agents []Agent, subjects natsbus.Subjects, st store.Store, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("upgrade stream %s: %w", stream, err)
	}
	cfg := s.CachedInfo().Config
	if cfg.Metadata["agent-worker"] == "" {
		return nil
	}
	var old []string
	infos := s.ListConsumers(ctx)
	for ci := range infos.Info() {
		n := ci.Config.Durable
		if n == oldUnknown || strings.HasPrefix(n, oldWakePrefix) || strings.HasPrefix(n, oldDeferredPrefix) {
			old = append(old, n)
		}
	}
	if err := infos.Err(); err != nil {
		return fmt.Errorf("upgrade stream %s: list consumers: %w", stream, err)
	}
	if cfg.Retention == jetstream.InterestPolicy {
		byName := layout(agents, subjects).agents
		for _, a := range agents {
			c, err := firstCursors(ctx, s, byName[a.Name])
			if err != nil {
				return fmt.Errorf("upgrade stream %s: %w", stream, err)
			}
			if err := storeFirstCursors(ctx, st, a.Name, c); err != nil {
				return fmt.Errorf("upgrade stream %s: %w", stream, err)
			}
			log.Info("upgrade: the agent's first cursors, from its consumers' ack floors", "agent", a.Name, "cursors", c)
		}
		cfg.Retention = jetstream.LimitsPolicy
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("upgrade stream %s to limits retention: %w", stream, err)
		}
		log.Warn("upgrade: the input stream is a log now (limits retention); the agents' consumers go", "stream", stream, "agents", len(agents))
	}
	for _, n := range old {
		if err := s.DeleteConsumer(ctx, n); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("upgrade stream %s: delete consumer %s: %w", stream, n, err)
		}
	}
	if len(old) > 0 {
		log.Info("upgrade: deleted the consumers of the layout before the log", "stream", stream, "consumers", len(old))
	}
	return nil
}

// firstCursors returns a's cursors from its old consumers' ack floors: the
// wake consumer's for its inbox and wake subscribe: subjects, the deferred
// one's for the rest. A missing consumer gives none.
func firstCursors(ctx context.Context, s jetstream.Stream, a *agentLog) (inbox.Cursors, error) {
	c := inbox.Cursors{}
	for _, kind := range []inbox.Kind{inbox.Wake, inbox.Deferred} {
		name := oldWakePrefix + a.name
		if kind == inbox.Deferred {
			name = oldDeferredPrefix + a.name
		}
		cons, err := s.Consumer(ctx, name)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("consumer %s: %w", name, err)
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("consumer %s: %w", name, err)
		}
		for _, in := range a.inputs {
			if in.kind == kind && info.AckFloor.Stream > 0 {
				c[in.key] = info.AckFloor.Stream
			}
		}
	}
	return c, nil
}

// storeFirstCursors stores c as agent's cursors, merged with what is
// stored (a cursor only moves forward).
func storeFirstCursors(ctx context.Context, st store.Store, agent string, c inbox.Cursors) error {
	key := inbox.CursorsKey(agent)
	var have inbox.Cursors
	if _, err := store.GetJSON(ctx, st, key, &have); err != nil && !errors.Is(err, store.ErrUnreadable) {
		return fmt.Errorf("read cursors of %s: %w", agent, err)
	}
	raw, _ := json.Marshal(have.Merge(c))
	if _, err := st.Put(ctx, key, raw); err != nil {
		return fmt.Errorf("store cursors of %s: %w", agent, err)
	}
	return nil
}
