package background

import (
	"encoding/json"

	"github.com/nats-io/nats.go"
)

func (r *remote) notify(n notice) error {
	o := r.opts()
	msg := nats.NewMsg(o.Subjects.SubagentNotice(n.Parent))
	msg.Data, _ = json.Marshal(n)
	r.seal(msg)
	if err := o.NATS.PublishMsg(msg); err != nil {
		return err
	}
	return o.NATS.Flush()
}

// onNotice stops this replica's subagents that a halt or stop notice
// names.
func (r *remote) onNotice(msg *nats.Msg) {
	if !r.sealed(msg.Subject, msg.Header, msg.Data) {
		r.forged("notice", msg.Subject, msg.Data)
		return
	}
	var n notice
	if err := json.Unmarshal(msg.Data, &n); err != nil {
		return
	}
	switch n.Op {
	case "halt":
		r.m.cancelParent(n.Parent, haltCause(n.Reason))
	case "stop":
		r.m.mu.Lock()
		if f := r.m.parents[n.Parent]; f != nil {
			if s := f.running[n.ID]; s != nil {
				s.cancel(stopCause(n.By))
			}
		}
		r.m.mu.Unlock()
	}
}

// parentHalted queues a halt notice for parent (from the driver's halted
// event, in Publish: it must not block).
func (r *remote) parentHalted(parent, reason string) {
	r.m.mu.Lock()
	known := r.m.parents[parent] != nil
	r.m.mu.Unlock()
	if !known {
		return
	}
	select {
	case r.halts <- notice{Op: "halt", Parent: parent, Reason: reason}:
	default:
		r.opts().Log.Warn("halt notice dropped (too many at once); subagents stop at their next model call", "agent", parent)
	}
}

// publishHalts publishes the queued halt notices until close.
func (r *remote) publishHalts() {
	for {
		select {
		case <-r.done:
			return
		case n := <-r.halts:
			if err := r.notify(n); err != nil {
				r.opts().Log.Warn("halt notice not published; subagents stop at their next model call", "agent", n.Parent, "error", err)
			}
		}
	}
}
