package metrics

// The fixed label values. Each set mirrors constants of the package that
// publishes the event (named in the comment); a value outside its set is
// counted as other. The slices are never modified.
var (
	// driver.Outcome*: turn-completed is "completed", turn-failed carries
	// one of the others.
	turnOutcomes = []string{"completed", "failed", "timeout", "interrupted", "halted", "shutdown", "capped", "unavailable", "abandoned"}
	// driver.Source*.
	wakeSources = []string{"inbox", "timer", "heartbeat", "schedule", "operator", "subagent", "startup", "retry", "alertmanager"}
	// The reasons of the driver's retry-scheduled event.
	retryReasons = []string{"failure", "outage"}
	// approval-requested, and the decisions of approval-decided
	// (driver.Decision*).
	approvalOutcomes = []string{"requested", "approved", "denied", "expired"}
	// The reasons of the driver's journal-abandoned event.
	journalReasons = []string{"interrupted", "halted", "timeout", "capped", "expired", "inputs_missing", "too_large"}
	// The reasons of the driver's throttled event.
	throttleReasons = []string{"max_per_wake", "turns_per_hour"}
	// inbox.Wake and inbox.Deferred.
	messageKinds = []string{"inbox", "deferred"}
	// inbox.Reject* (a refused body, and the drop reasons) and
	// natsinbox.RejectUnknownAgent.
	rejectReasons = []string{"too_large", "invalid_utf8", "invalid_json", "no_text", "empty", "unknown_agent", "dropped", "operator_dropped", "turn_cap"}
	// driver.States.
	agentStates = []string{"sleeping", "running", "paused", "halted", "stopped", "waiting"}
	// model-usage is ok, model-error is error.
	modelOutcomes = []string{"ok", "error", "retry", "rate_limited"}
	// The guard's tool-call event.
	toolOutcomes = []string{"ok", "error"}
	// guard.Turn, Session, Daily, WorkerDaily and Watchdog.
	guardrails = []string{"turn_usd", "session_usd", "daily_usd", "worker_daily_usd", "watchdog"}
	// watchdog.Signal*.
	watchdogSignals = []string{"repeat", "cycle", "dominant", "failures", "turn_repeat"}
	// The outcomes of a finished subagent.
	subagentOutcomes = []string{"completed", "failed", "stopped", "timeout"}
	// scheduler.Outcome*.
	scheduleOutcomes = []string{"fired", "missed", "skipped_overlap", "skipped_paused", "skipped_halted"}
	// api.Outcome*: what the Alertmanager receiver did with a notification.
	alertmanagerOutcomes = []string{"accepted", "duplicate", "rejected", "truncated"}
)

// tokenTypes maps the model-usage data keys to the type label of
// model_tokens_total, in exposition order.
var tokenTypes = []struct{ key, label string }{
	{"input_tokens", "input"},
	{"cached_input_tokens", "cached_input"},
	{"cache_write_tokens", "cache_write"},
	{"output_tokens", "output"},
}

// other is the label value for anything outside a fixed set.
const other = "other"

// unknownAgent is the agent label of input rejected because it named no
// configured agent (natsbus.UnknownAgent).
const unknownAgent = "_unknown"

// oneOf returns v if it is in set, else other.
func oneOf(v string, set []string) string {
	for _, s := range set {
		if s == v {
			return v
		}
	}
	return other
}
