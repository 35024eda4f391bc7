package distributed

import (
	"time"
)

// job is a queued subagent, the body of a message on
// <prefix>._subagents.jobs (Nats-Msg-Id: ID).
type job struct {
	ID     string    `json:"id"`
	Parent string    `json:"parent"`
	Task   string    `json:"task"`
	Queued time.Time `json:"queued"`
	// TraceParent is the spawning turn's trace context, if traced: the
	// run links to it.
	TraceParent string `json:"traceparent,omitempty"`
	// Key is the spawn's idempotency key (Manager.SpawnKeyed), if any.
	Key string `json:"key,omitempty"`
}

// chargeRecord is one model call's cost, the body of a message on
// <prefix>._subagents.charges.<parent> (Nats-Msg-Id:
// charge-<id>-<run>-<call>). (ID, Run, Call) is its idempotency key.
type chargeRecord struct {
	Parent string  `json:"parent"`
	ID     string  `json:"id"`
	Run    int     `json:"run"`
	Call   int     `json:"call"`
	USD    float64 `json:"usd"`
}

// notice is a halt or stop, the body of a message on
// <prefix>._subagents.notice.<parent>.
type notice struct {
	Op     string `json:"op"` // "halt" or "stop"
	Parent string `json:"parent"`
	ID     string `json:"id,omitempty"`     // stop
	Reason string `json:"reason,omitempty"` // halt: why the parent is halted
	By     string `json:"by,omitempty"`     // stop: who asked
}

// admitRequest asks the parent's owner whether a subagent may call its
// model; admitReply is the answer.
type admitRequest struct {
	Parent string `json:"parent"`
	ID     string `json:"id"`
}

type admitReply struct {
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
}
