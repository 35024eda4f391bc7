package hook

// Audit says who asked for an operator action and why. The action's event
// carries both ("by", and "reason" when given) and its time; a pause keeps
// them in its stored record, so status shows them after a restart or a
// change of owner. The driver's operator methods and a plug-in's own
// operator actions (guard.Guard.ResetAs) take it.
type Audit struct {
	// By names the caller: the operator API's token name ("anonymous" on
	// an API without tokens), "nats" for a request on the control subject
	// that named nobody, or whatever an in-process caller says. "" is
	// unknown; the events then carry no "by".
	By string `json:"by,omitempty"`
	// Reason is the operator's own words ("db migration"); optional.
	Reason string `json:"reason,omitempty"`
}

// Fields returns the audit fields as event data: "by" and "reason", each
// only when set. The map is new on every call: the caller may add to it.
func (au Audit) Fields() map[string]any {
	data := map[string]any{}
	if au.By != "" {
		data["by"] = au.By
	}
	if au.Reason != "" {
		data["reason"] = au.Reason
	}
	return data
}
