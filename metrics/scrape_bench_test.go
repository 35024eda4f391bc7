package metrics

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/events"
)

// scrapeAgents is the agent count of the /metrics scale row (issue 16).
const scrapeAgents = 1000

// benchModes are the per-agent modes BenchmarkScrape compares.
var benchModes = []string{string(PerAgentFull), string(PerAgentLazy)}

// newForBench is NewWith in mode ("": auto).
func newForBench(infos []AgentInfo, src Source, mode string) *Metrics {
	return NewWith(infos, src, Options{PerAgent: PerAgent(mode)})
}

// scrapeFixture is a worker's metrics at n agents, each with three tools
// and two schedules, and a Source reporting every agent's gauges; mode ""
// is auto.
func scrapeFixture(n int, mode string) *Metrics {
	infos := make([]AgentInfo, n)
	gauges := make([]AgentGauges, n)
	next := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	for i := range infos {
		name := fmt.Sprintf("agent-%04d", i)
		infos[i] = AgentInfo{Name: name, Model: "gpt-4.1-mini", Priced: true,
			Tools: []string{"publish", "http_get", "report_done"}, Schedules: []string{"morning", "hourly"}}
		gauges[i] = AgentGauges{Name: name, State: "sleeping",
			NextSchedule: map[string]time.Time{"morning": next, "hourly": next}}
	}
	return newForBench(infos, staticSource(gauges), mode)
}

type staticSource []AgentGauges

func (s staticSource) Gauges() []AgentGauges { return s }

// activity makes every agent run one turn: a wake, a message, a model
// call and a tool call, so that the lazily created series exist too.
func activity(m *Metrics, n int) {
	t0 := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	for i := range n {
		name := fmt.Sprintf("agent-%04d", i)
		for _, e := range []events.Event{
			{Agent: name, Type: events.MessageQueued, Data: map[string]any{"kind": "inbox"}},
			{Agent: name, Type: events.Wake, Data: map[string]any{"source": "inbox"}},
			{Agent: name, Type: events.TurnStarted, Time: t0, Data: map[string]any{"cause_at": t0.Add(-3 * time.Millisecond)}},
			{Agent: name, Type: eventModelUsage, Data: map[string]any{"model": "gpt-4.1-mini", "input_tokens": 1200, "output_tokens": 80, "cost_usd": 0.0004}},
			{Agent: name, Type: eventToolCall, Data: map[string]any{"tool": "publish", "outcome": "ok"}},
			{Agent: name, Type: events.TurnCompleted, Data: map[string]any{"duration_ms": 1800}},
		} {
			m.record(e)
		}
	}
}

// scrapeResult is what one scrape of Handler costs.
type scrapeResult struct {
	plain, gzipped int           // body bytes without and with Accept-Encoding: gzip
	plainCPU       time.Duration // per scrape, uncompressed
	gzipCPU        time.Duration // per scrape, gzip (what Prometheus asks for)
	series         int
}

// scrape serves one request to h and returns the body's size.
func scrape(h http.Handler, gz bool) (int, string) {
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body := rec.Body.String()
	if gz && rec.Header().Get("Content-Encoding") == "gzip" {
		r, err := gzip.NewReader(strings.NewReader(body))
		if err == nil {
			plain, _ := io.ReadAll(r)
			return len(body), string(plain)
		}
	}
	return len(body), body
}

// allocPerScrape is the bytes one gzip scrape of h allocates, averaged
// over rounds: the garbage that, with the live heap, sets the GC's peak
// (and so RSS).
func allocPerScrape(h http.Handler, rounds int) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range rounds {
		scrape(h, true)
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(rounds)
}

// heapAfterGC is the live heap after two collections.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// measureScrapes times rounds scrapes of m each way.
func measureScrapes(m *Metrics, rounds int) scrapeResult {
	var r scrapeResult
	h := m.Handler()
	var body string
	r.plain, body = scrape(h, false)
	r.gzipped, _ = scrape(h, true)
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "agent_worker_") {
			r.series++
		}
	}
	t0 := time.Now()
	for range rounds {
		scrape(h, false)
	}
	r.plainCPU = time.Since(t0) / time.Duration(rounds)
	t0 = time.Now()
	for range rounds {
		scrape(h, true)
	}
	r.gzipCPU = time.Since(t0) / time.Duration(rounds)
	return r
}

// BenchmarkScrape prints the /metrics row of the scale table: one scrape
// at 1,000 agents (three tools and two schedules each) in each per-agent
// mode, idle (no event yet) and after one turn per agent, against the
// anchor of a registry holding only the Go and process collectors.
// Goal: ≤ 1 MB and ≤ 30 ms a scrape, the heap after GC flat over 20
// scrapes. Scrapes run one at a time on one goroutine, so their wall time
// is their CPU time.
func BenchmarkScrape(b *testing.B) {
	const rounds = 10 // each way: 20 scrapes between "heap before" and "heap after"
	for range b.N {
		anchor := measureScrapes(newForBench(nil, nil, "full"), rounds)
		fmt.Printf("/metrics at %d agents (3 tools, 2 schedules each); anchor: no agents, %d B, %v a scrape\n",
			scrapeAgents, anchor.plain, anchor.plainCPU.Round(10*time.Microsecond))
		fmt.Printf("%-6s %-6s %7s %10s %8s %7s %8s %9s %11s %10s %8s\n",
			"mode", "state", "series", "bytes", "gzip B", "ms", "gzip ms", "alloc/scr", "heap before", "heap after", "×anchor")
		for _, mode := range benchModes {
			for _, active := range []bool{false, true} {
				m := scrapeFixture(scrapeAgents, mode)
				state := "idle"
				if active {
					activity(m, scrapeAgents)
					state = "active"
				}
				scrape(m.Handler(), true) // warm the pools
				before := heapAfterGC()
				r := measureScrapes(m, rounds)
				after := heapAfterGC()
				alloc := allocPerScrape(m.Handler(), 3)
				fmt.Printf("%-6s %-6s %7d %10d %8d %7.1f %8.1f %8.1fM %10.1fM %9.1fM %8.1f\n",
					mode, state, r.series, r.plain, r.gzipped,
					float64(r.plainCPU.Microseconds())/1000, float64(r.gzipCPU.Microseconds())/1000,
					float64(alloc)/(1<<20), float64(before)/(1<<20), float64(after)/(1<<20),
					float64(r.gzipCPU)/float64(anchor.gzipCPU))
				runtime.KeepAlive(m)
			}
		}
		fmt.Println("full is the shape before metrics.per_agent (every series at 0); auto is lazy at 1,000 agents. ×anchor: gzip ms over the anchor's.")
		fmt.Println("goal: ≤ 1,000,000 bytes and ≤ 30 ms a scrape at 1,000 agents; heap after ≈ heap before")
	}
}
