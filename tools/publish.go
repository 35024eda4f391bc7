package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/adk/tool"
	"google.golang.org/adk/tool/functiontool"

	"github.com/agent-worker/agent-worker/natsbus/subject"
)

// PublishArgs are publish's arguments.
type PublishArgs struct {
	Subject string `json:"subject" jsonschema:"the NATS subject to publish to; must be one this agent is allowed"`
	Text    string `json:"text" jsonschema:"the message text"`
}

// PublishResult is what the model is told.
type PublishResult struct {
	Published bool   `json:"published"`
	Subject   string `json:"subject"`
}

// newPublish builds publish. A subject internal to the worker
// (subject.Internal) is refused before the allow patterns are consulted,
// so no pattern — not even ">" from a config that skipped validation —
// lets the model write the worker's state, control or events.
func newPublish(env Env) (tool.Tool, error) {
	if env.Publisher == nil {
		return nil, errors.New("no NATS publisher is available to this worker")
	}
	allow := strings.Join(env.PublishAllow, ", ")
	if allow == "" {
		allow = "none"
	}
	desc := "Publish a message on a NATS subject for other systems or agents. Allowed subjects: " + allow +
		"; never the worker's own subjects (its state, control, events and dead letters)."
	return newTool(functiontool.Config{Name: Publish, Description: desc}, func(ctx tool.Context, a PublishArgs) (PublishResult, error) {
		if !subject.Valid(a.Subject) {
			return PublishResult{}, fmt.Errorf("%q is not a subject you can publish to (dot-separated tokens, no wildcards)", a.Subject)
		}
		if in := subject.Reaches(a.Subject, env.SubjectPrefix); len(in) > 0 {
			return PublishResult{}, fmt.Errorf("subject %q is internal to the worker: %s; publish may not write it", a.Subject, in[0].What)
		}
		if !allowed(env.PublishAllow, a.Subject) {
			return PublishResult{}, fmt.Errorf("subject %q is not allowed for this agent; allowed: %s", a.Subject, allow)
		}
		if strings.TrimSpace(a.Text) == "" {
			return PublishResult{}, errors.New("text is required")
		}
		data, _ := json.Marshal(map[string]string{"text": a.Text, "from": env.Agent})
		// The action id makes a publish repeated by a resumed turn (its
		// first result was not recorded) a duplicate, not a second report.
		id := ""
		if env.Host != nil {
			id = env.Host.ActionID(ctx.FunctionCallID())
		}
		if err := env.Publisher.Publish(ctx, a.Subject, data, id); err != nil {
			return PublishResult{}, fmt.Errorf("publish to %q failed: %w", a.Subject, err)
		}
		return PublishResult{Published: true, Subject: a.Subject}, nil
	})
}

func allowed(patterns []string, s string) bool {
	for _, p := range patterns {
		if subject.Match(p, s) {
			return true
		}
	}
	return false
}
