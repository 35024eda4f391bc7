package metrics_test

import (
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/metrics"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// testAgents returns a fresh config: oncall is priced, has two tools and a
// schedule; demo has none of them.
func testAgents() []metrics.AgentInfo {
	return []metrics.AgentInfo{
		{Name: "oncall", Model: "gpt-4.1-mini", Priced: true, Tools: []string{"publish", "report_done"}, Schedules: []string{"morning"}},
		{Name: "demo", Model: "fake-1"},
	}
}

// observe publishes evs on a fresh bus observed by m, and returns once m
// has counted all of them.
func observe(t *testing.T, m *metrics.Metrics, evs ...events.Event) {
	t.Helper()
	bus := events.NewBus(0, nil)
	stop := m.Observe(bus)
	for _, e := range evs {
		bus.Publish(e)
	}
	stop()
}

// series gathers g into name{label="value",...} -> value, for the
// agent_worker_ families. Histograms give name_count and name_sum.
func series(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, "agent_worker_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := key(m.GetLabel())
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[name+labels] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name+labels] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"+labels] = float64(m.GetHistogram().GetSampleCount())
				out[name+"_sum"+labels] = m.GetHistogram().GetSampleSum()
			default:
				t.Fatalf("%s: unexpected type %s", name, mf.GetType())
			}
		}
	}
	return out
}

func key(pairs []*dto.LabelPair) string {
	parts := make([]string, 0, len(pairs))
	for _, p := range pairs {
		parts = append(parts, p.GetName()+"="+`"`+p.GetValue()+`"`)
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// family returns the series of one metric name.
func family(all map[string]float64, name string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range all {
		if strings.HasPrefix(k, name+"{") {
			out[k] = v
		}
	}
	return out
}

// expect fails for every series of want whose value differs from got, or
// that got lacks.
func expect(t *testing.T, got, want map[string]float64) {
	t.Helper()
	names := make([]string, 0, len(want))
	for k := range want {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v, ok := got[k]
		switch {
		case !ok:
			t.Errorf("missing series %s (want %g)", k, want[k])
		case math.Abs(v-want[k]) > 1e-9:
			t.Errorf("%s = %g, want %g", k, v, want[k])
		}
	}
}

// source is a Source whose gauges the test changes between scrapes.
type source struct {
	mu sync.Mutex
	gs []metrics.AgentGauges
}

func (s *source) set(gs ...metrics.AgentGauges) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gs = gs
}

func (s *source) Gauges() []metrics.AgentGauges {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gs
}

var t0 = time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
