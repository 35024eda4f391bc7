package tools

import (
	"strings"
	"testing"

	"google.golang.org/adk/tool"
	"google.golang.org/adk/tool/toolconfirmation"
)

type recorder struct{ got []string }

func (r *recorder) Publish(subject string, data []byte) error {
	r.got = append(r.got, subject+" "+string(data))
	return nil
}

// runnable is the ADK interface function tools implement.
type runnable interface {
	Run(ctx tool.Context, args any) (map[string]any, error)
}

// toolCtx is the least of a tool.Context that a function tool touches
// outside a real ADK run.
type toolCtx struct{ tool.Context }

func (toolCtx) ToolConfirmation() *toolconfirmation.ToolConfirmation { return nil }

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
