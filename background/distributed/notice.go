package distributed

import (
	"encoding/json"

	"github.com/nats-io/nats.go"
)

func (q *queue) notify(n notice) error {
	o := &q.o
	msg := nats.NewMsg(o.Subjects.SubagentNotice(n.Parent))
	msg.Data, _ = json.Marshal(n)
	q.seal(msg)
	if err := o.NATS.PublishMsg(msg); err != nil {
		return err
	}
	return o.NATS.Flush()
}

// onNotice stops this replica's subagents that a halt or stop notice
// names.
func (q *queue) onNotice(msg *nats.Msg) {
	if !q.sealed(msg.Subject, msg.Header, msg.Data) {
		q.forged("notice", msg.Subject, msg.Data)
		return
	}
	var n notice
	if err := json.Unmarshal(msg.Data, &n); err != nil {
		return
	}
	switch n.Op {
	case "halt":
		_ = q.h.Halt(n.Parent, "", n.Reason)
	case "stop":
		if n.ID != "" {
			_ = q.h.Stop(n.Parent, n.ID, n.By)
		}
	}
}

// Halted queues a halt notice for parent (from the driver's halted
// event, in Publish: it must not block).
func (q *queue) Halted(parent, reason string) {
	if !q.knows(parent) {
		return
	}
	select {
	case q.halts <- notice{Op: "halt", Parent: parent, Reason: reason}:
	default:
		q.log.Warn("halt notice dropped (too many at once); subagents stop at their next model call", "agent", parent)
	}
}

// publishHalts publishes the queued halt notices until close.
func (q *queue) publishHalts() {
	for {
		select {
		case <-q.done:
			return
		case n := <-q.halts:
			if err := q.notify(n); err != nil {
				q.log.Warn("halt notice not published; subagents stop at their next model call", "agent", n.Parent, "error", err)
			}
		}
	}
}
