package tools

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/adk/tool"
	"google.golang.org/adk/tool/toolconfirmation"
)

type recorder struct{ got, ids []string }

func (r *recorder) Publish(_ context.Context, subject string, data []byte, id string) error {
	r.got = append(r.got, subject+" "+string(data))
	r.ids = append(r.ids, id)
	return nil
}

// actionHost names actions as the driver does, from a fixed turn.
type actionHost struct{ quiet }

func (actionHost) ActionID(call string) string { return "oncall-t7-" + call }

// quiet is a Host that does nothing.
type quiet struct{}

func (quiet) Now() time.Time                    { return time.Time{} }
func (quiet) RequestWake(time.Time, string)     {}
func (quiet) ReportDone(string, map[string]any) {}
func (quiet) ActionID(string) string            { return "" }

// callCtx is a toolCtx inside a function call.
type callCtx struct {
	toolCtx
	id string
}

func (c callCtx) FunctionCallID() string { return c.id }

// A publish carries its call's action id as the message id, so the same
// call run again by a resumed turn is a duplicate to the stream.
func TestPublishCarriesTheCallsActionID(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	ts, err := Build([]string{Publish}, Env{Agent: "oncall", Host: actionHost{}, Publisher: rec, PublishAllow: []string{"ops.>"}})
	if err != nil {
		t.Fatal(err)
	}
	run := ts[0].(runnable)
	for range 2 {
		if _, err := run.Run(callCtx{id: "call_1"}, map[string]any{"subject": "ops.reports", "text": "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := run.Run(callCtx{id: "call_2"}, map[string]any{"subject": "ops.reports", "text": "x"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"oncall-t7-call_1", "oncall-t7-call_1", "oncall-t7-call_2"}; strings.Join(rec.ids, ",") != strings.Join(want, ",") {
		t.Fatalf("ids %q, want %q", rec.ids, want)
	}
}

// runnable is the ADK interface function tools implement.
type runnable interface {
	Run(ctx tool.Context, args any) (map[string]any, error)
}

// toolCtx is the least of a tool.Context that a function tool touches
// outside a real ADK run.
type toolCtx struct{ tool.Context }

func (toolCtx) ToolConfirmation() *toolconfirmation.ToolConfirmation { return nil }

// Value answers for the context the stub does not have: no values (the
// publish tool looks for a span to propagate).
func (toolCtx) Value(any) any { return nil }

func TestPublishAllowsOnlyConfiguredSubjects(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	ts, err := Build([]string{Publish}, Env{Agent: "oncall", Publisher: rec, PublishAllow: []string{"ops.reports.>"}})
	if err != nil {
		t.Fatal(err)
	}
	run := ts[0].(runnable)
	if _, err := run.Run(toolCtx{}, map[string]any{"subject": "ops.reports.capacity", "text": "all fine"}); err != nil {
		t.Fatalf("allowed subject refused: %v", err)
	}
	for _, bad := range []string{"ops.secrets", "agents.other.inbox", "ops.reports.>"} {
		_, err := run.Run(toolCtx{}, map[string]any{"subject": bad, "text": "x"})
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("subject %q: err = %v, want a refusal naming it", bad, err)
		}
	}
	if len(rec.got) != 1 || rec.got[0] != `ops.reports.capacity {"from":"oncall","text":"all fine"}` {
		t.Fatalf("published %q", rec.got)
	}
}

func TestPublishNeedsPublisher(t *testing.T) {
	t.Parallel()
	if _, err := Build([]string{Publish}, Env{}); err == nil {
		t.Fatal("publish built without a publisher")
	}
}
