package metrics

// skipReasons are the reason label values of turns_skipped_total: the
// driver's turn-skipped reasons (driver.SkipNothingToDo); any other value
// is counted as "other".
var skipReasons = []string{"nothing_to_do"}

// newSkipMetrics counts the wakes that ran no turn because the turn
// would have had nothing to do (the driver's turn-skipped events).
func newSkipMetrics() eventCounter {
	return newEventCounter("turns_skipped_total",
		"Wakes that ran no turn and called no model, by reason: nothing_to_do (an operator's bare wake or resume, or a failed turn's retry, with no message, task, instruction, report or approval decision queued).",
		"reason", skipReasons)
}
