package tools

import (
	"fmt"
	"strings"

	"google.golang.org/adk/tool"
	"google.golang.org/adk/tool/functiontool"
)

// ReportArgs are report_done's arguments.
type ReportArgs struct {
	Summary string         `json:"summary" jsonschema:"one or two sentences: what was completed"`
	Details map[string]any `json:"details,omitempty" jsonschema:"optional structured details"`
}

// ReportResult is what the model is told.
type ReportResult struct {
	Recorded bool `json:"recorded"`
}

func newReportDone(host Host) (tool.Tool, error) {
	return newTool(functiontool.Config{
		Name:        ReportDone,
		Description: "Record that you completed a task, with a short summary. Operators and pipelines see it as a report-done event.",
	}, func(_ tool.Context, a ReportArgs) (ReportResult, error) {
		if strings.TrimSpace(a.Summary) == "" {
			return ReportResult{}, fmt.Errorf("summary is required")
		}
		host.ReportDone(a.Summary, a.Details)
		return ReportResult{Recorded: true}, nil
	})
}
