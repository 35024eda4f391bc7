package inbox

// Drop reasons: why a message that was taken in was given up, the
// dead-letter reason a message from the log is dead-lettered with (and
// the record of one only memory held), the message-dropped event's reason
// and a messages_rejected_total{reason} label value. With the Reject*
// reasons of a refused body they are the whole closed set.
const (
	// RejectDropped: the inbox dropped the message — too many failed turns,
	// or the overflow of a message only memory held.
	RejectDropped = "dropped"
	// RejectOperatorDropped: an operator abandoned the queued message
	// (a resume with drop_queued).
	RejectOperatorDropped = "operator_dropped"
	// RejectTurnCap: the message's turn was cut at a per-turn limit after
	// it had spent money; it is not retried, since the same input would
	// most likely cross the same limit and be charged again.
	RejectTurnCap = "turn_cap"
)
