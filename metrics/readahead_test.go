package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agent-worker/agent-worker/metrics"
)

// readAhead is a worker's input window as the metrics see it.
type readAhead struct {
	metrics.Source
	held           int64
	window, stream uint64
	ok             bool
}

func (r readAhead) ReadAhead() (int64, uint64, uint64, bool) { return r.held, r.window, r.stream, r.ok }

// The window's bytes and the reads by where they were served are read at
// scrape time; without JetStream (ok false) there is no series.
func TestReadAheadIsReportedAtScrape(t *testing.T) {
	t.Parallel()
	m := metrics.New(testAgents(), readAhead{Source: &source{}, held: 4096, window: 7, stream: 2, ok: true})
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			name := f.GetName()
			for _, l := range s.GetLabel() {
				name += "/" + l.GetValue()
			}
			switch {
			case s.GetCounter() != nil:
				got[name] = s.GetCounter().GetValue()
			case s.GetGauge() != nil:
				got[name] = s.GetGauge().GetValue()
			}
		}
	}
	for name, want := range map[string]float64{
		"agent_worker_read_ahead_bytes":         4096,
		"agent_worker_input_reads_total/window": 7,
		"agent_worker_input_reads_total/stream": 2,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	none := metrics.New(testAgents(), readAhead{Source: &source{}})
	if n, err := testutil.GatherAndCount(none.Registry(), "agent_worker_input_reads_total", "agent_worker_read_ahead_bytes"); err != nil || n != 0 {
		t.Fatalf("without JetStream: %d series (%v), want none", n, err)
	}
}
