package natsinbox

import (
	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/tracing"
)

// traceParent is the W3C traceparent header of a message, when it has a
// well-formed one; "" otherwise. A malformed one is not an error: the
// message is delivered, only without a link to its sender's trace.
func traceParent(h nats.Header) string {
	if tp := tracing.FromNATS(h); tracing.Valid(tp) {
		return tp
	}
	return ""
}
