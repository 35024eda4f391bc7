package metrics

// askOutcomes are the outcome label values of asks_total: the driver's
// asked event's outcome (driver.AskAnswered, ...); any other value is
// counted as "other".
var askOutcomes = []string{"answered", "refused", "failed", "timeout", "cancelled"}

// newAskMetrics counts operators' asks (the driver's asked events,
// published by the agent's owner). An ask's model usage and cost are in
// the model_* families, as any call's.
func newAskMetrics() eventCounter {
	return newEventCounter("asks_total",
		"Operators' side questions to an agent (POST /v1/agents/{name}/ask), by outcome: answered, refused (halted, a cost ceiling, another ask running, stopped), failed (the model call failed), timeout, cancelled (the caller went away, or the worker shut down). Counted by the agent's owner.",
		"outcome", askOutcomes)
}
