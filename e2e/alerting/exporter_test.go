package alerting

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// exporter is the tiny metrics endpoint the test controls: one gauge,
// test_alert{name, host, severity}, whose series the test sets to 1
// (firing) or 0. Prometheus scrapes it; the alert rules fire on value > 0.
// A scrape sees one consistent state: set changes many series at once.
type exporter struct {
	srv    *httptest.Server
	mu     sync.Mutex
	series map[series]float64
}

type series struct{ name, host, severity string }

func newExporter(t *testing.T) *exporter {
	e := &exporter{series: map[series]float64{}}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.srv.Close)
	return e
}

// addr is the exporter's host:port, Prometheus' scrape target.
func (e *exporter) addr() string { return strings.TrimPrefix(e.srv.URL, "http://") }

// set gives every series in ss the value v.
func (e *exporter) set(v float64, ss ...series) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range ss {
		e.series[s] = v
	}
}

func (e *exporter) serve(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	lines := make([]string, 0, len(e.series))
	for s, v := range e.series {
		lines = append(lines, fmt.Sprintf("test_alert{name=%q,host=%q,severity=%q} %g", s.name, s.host, s.severity, v))
	}
	e.mu.Unlock()
	slices.Sort(lines)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# HELP test_alert 1 while the test wants the alert on this series to fire.\n# TYPE test_alert gauge\n%s\n", strings.Join(lines, "\n"))
}
