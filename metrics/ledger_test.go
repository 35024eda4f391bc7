package metrics_test

import (
	"testing"

	"github.com/agent-worker/agent-worker/metrics"
)

// ledgerSource is a source that also reports the guard's ledger writes.
type ledgerSource struct {
	source
	failures uint64
	unstored int
}

func (s *ledgerSource) LedgerWriteFailures() uint64 { return s.failures }
func (s *ledgerSource) LedgersUnstored() int        { return s.unstored }

// Failed ledger writes and ledgers not yet stored are read from the
// source at scrape time; a source without them exports neither.
func TestLedgerWritesAreReported(t *testing.T) {
	t.Parallel()
	src := &ledgerSource{failures: 3, unstored: 2}
	got := series(t, metrics.New(testAgents(), src).Registry())
	expect(t, got, map[string]float64{
		`agent_worker_ledger_write_failures_total{}`: 3,
		`agent_worker_ledgers_unstored{}`:            2,
	})
	plain := series(t, metrics.New(testAgents(), &source{}).Registry())
	for _, name := range []string{"agent_worker_ledger_write_failures_total{}", "agent_worker_ledgers_unstored{}"} {
		if _, ok := plain[name]; ok {
			t.Errorf("%s exported without a ledger source", name)
		}
	}
}
