package api

import (
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/turnlog"
)

// The page prints money as money.USD does: a $0.00002 turn is not
// "$0.0000", and a daily spend over its tiny ceiling reads as over it.
func TestPagePrintsMoneyInTheOneFormat(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	if got := pageRecentOf(turnlog.Turn{N: 1, Started: now, CostUSD: 0.00002}, now).Cost; got != "$0.00002" {
		t.Errorf("turn cost: %q, want $0.00002", got)
	}
	b := barOf("daily", guard.Ceiling{SpentUSD: 0.00012, CeilingUSD: 0.0001})
	if b.Spent != "$0.00012" || b.Ceiling != "$0.0001" {
		t.Errorf("daily bar: %s of %s, want $0.00012 of $0.0001", b.Spent, b.Ceiling)
	}
	if b := barOf("session", guard.Ceiling{SpentUSD: 1234.5, CeilingUSD: 5000}); b.Spent != "$1234.50" || b.Ceiling != "$5000" {
		t.Errorf("session bar: %s of %s, want $1234.50 of $5000", b.Spent, b.Ceiling)
	}
}
