package background

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agent-worker/agent-worker/inbox"
)

// outcomeOf classifies a finished run: its outcome and, unless it
// completed, why.
func outcomeOf(err, cause error) (outcome, why string) {
	switch {
	case errors.Is(cause, errStopped), errors.Is(cause, errParentHalted), errors.Is(cause, ErrShutdown), errors.Is(cause, errParentRemoved):
		return OutcomeStopped, cause.Error()
	case errors.Is(cause, context.DeadlineExceeded):
		return OutcomeTimeout, "it ran longer than its timeout"
	case cause != nil:
		return OutcomeFailed, cause.Error()
	case err != nil:
		return OutcomeFailed, err.Error()
	}
	return OutcomeCompleted, ""
}

// reportText is what the parent reads about a finished subagent.
func reportText(id, task, outcome, why, text string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Subagent %s %s", id, outcome)
	switch {
	case why == "":
	case outcome == OutcomeStopped && strings.HasPrefix(why, "stopped by "):
		fmt.Fprintf(&b, " %s", strings.TrimPrefix(why, "stopped ")) // "Subagent x stopped by its parent."
	default:
		fmt.Fprintf(&b, ": %s", why)
	}
	fmt.Fprintf(&b, ".\nTask: %s\n", task)
	switch {
	case outcome == OutcomeCompleted:
		fmt.Fprintf(&b, "Result:\n%s", text)
	case text != "":
		fmt.Fprintf(&b, "Last words:\n%s", text)
	}
	return b.String()
}

// finish reports the subagent's result (or why there is none) to its
// parent, which wakes for it. In distributed mode the report goes over
// NATS and the job is acked after, or handed back when this replica is
// shutting down before it finished.
func (m *Manager) finish(f *family, s *sub, text string, err, cause error) {
	outcome, why := outcomeOf(err, cause)
	if s.job != nil {
		m.mu.Lock()
		spent := s.spent
		m.mu.Unlock()
		// Still listed as running here until settled, so a redelivery
		// of its job meanwhile is not run a second time.
		s.job.Finish(End{Outcome: outcome, Report: reportText(s.id, s.task, outcome, why, text), Trace: s.trace,
			Spent: spent, Err: err, Shutdown: errors.Is(cause, ErrShutdown)})
		m.mu.Lock()
		delete(f.running, s.id)
		m.mu.Unlock()
		return
	}
	m.mu.Lock()
	delete(f.running, s.id)
	closing := m.closing
	spent := s.spent
	m.mu.Unlock()
	m.o.Log.Info("subagent finished", "agent", f.name, "subagent", s.id, "outcome", outcome, "cost_usd", spent, "error", err)
	m.emit(f.name, EventFinished, map[string]any{"id": s.id, "outcome": outcome, "cost_usd": spent})
	now := m.o.Clock.Now()
	m.mu.Lock()
	info := s.info(m.o.Replica, outcome)
	info.Finished = &now
	list := append([]Info{info}, m.finished[f.name]...)
	if len(list) > KeepFinished {
		list = list[:KeepFinished]
	}
	m.finished[f.name] = list
	m.mu.Unlock()
	if closing {
		return // the parent is stopping too; nothing would take the report
	}
	f.parent.Report(s.id, inbox.Message{ID: s.id, Source: "subagent:" + s.id, From: s.id, Text: reportText(s.id, s.task, outcome, why, text), TraceParent: s.trace})
}
