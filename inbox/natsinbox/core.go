package natsinbox

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/natsbus"
)

// Core NATS mode (no JetStream): plain subscriptions, at most once. A
// message reaches an agent only while this replica serves it and is
// subscribed; nothing keeps it, nothing is read again.

// startCore subscribes to every agent subject, to dead-letter input for
// agents that are not configured; configured agents' own subscriptions
// come with Bind.
func (b *Binding) startCore() error {
	for _, subj := range []string{b.opts.Subjects.AllInboxes(), b.opts.Subjects.AllDeferred()} {
		sub, err := b.nc.Subscribe(subj, func(m *nats.Msg) { b.onUnknownCore(m) })
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", subj, err)
		}
		b.mu.Lock()
		b.all = append(b.all, sub)
		b.mu.Unlock()
	}
	// Once Start returns, the server knows every subscription.
	return b.nc.Flush()
}

// subscribeCore subscribes to one agent's subjects.
func (b *Binding) subscribeCore(a *agentLog) error {
	b.mu.Lock()
	_, bound := b.subs[a.name]
	b.mu.Unlock()
	if bound {
		return nil
	}
	var subs []*nats.Subscription
	for _, in := range a.inputs {
		sub, err := b.nc.Subscribe(in.key, func(m *nats.Msg) { b.onCore(a, in, m) })
		if err != nil {
			for _, s := range subs {
				_ = s.Unsubscribe()
			}
			return fmt.Errorf("subscribe %s for agent %s: %w", in.key, a.name, err)
		}
		subs = append(subs, sub)
	}
	b.mu.Lock()
	b.subs[a.name] = subs
	b.mu.Unlock()
	return b.nc.Flush()
}

// unsubscribeCore ends one agent's subscriptions.
func (b *Binding) unsubscribeCore(name string) {
	b.mu.Lock()
	subs := b.subs[name]
	delete(b.subs, name)
	b.mu.Unlock()
	for _, s := range subs {
		_ = s.Unsubscribe()
	}
}

// onCore hands one core NATS message to agent a (at most once).
func (b *Binding) onCore(a *agentLog, in *input, m *nats.Msg) {
	body, err := inbox.ParseBody(m.Data, b.opts.MaxBytes)
	if err != nil {
		_ = b.reject(a.name, m.Header.Get(nats.MsgIdHdr), m.Subject, m.Data, m.Header, err, "")
		return
	}
	id := natsbus.PlainMsgID(a.name, m.Header.Get(nats.MsgIdHdr), body.ID)
	if id == "" {
		id = body.ID
	}
	via, sender := b.claims(a.name, m.Subject, m.Header, m.Data)
	a.to().Send(inbox.Message{
		ID: id, Kind: in.kind, Source: source(m.Subject, via, id), Via: via, Sender: sender, From: body.From,
		Text: body.Text, Attributes: body.Attributes, Received: b.opts.Clock.Now(), TraceParent: traceParent(m.Header),
	})
}

// onUnknownCore dead-letters input addressed to an agent that is not
// configured; input for known agents is theirs and ignored here.
func (b *Binding) onUnknownCore(m *nats.Msg) {
	agent, _, ok := b.opts.Subjects.Agent(m.Subject)
	if ok && b.agent(agent) != nil {
		return
	}
	why := &inbox.RejectError{Reason: RejectUnknownAgent, Detail: fmt.Sprintf("no agent %q is configured", agent)}
	_ = b.reject(natsbus.UnknownAgent, m.Header.Get(nats.MsgIdHdr), m.Subject, m.Data, m.Header, why, "")
}
