package metrics

import (
	"runtime"
	"strings"
	"testing"
)

// At 1,000 agents the default (auto: lazy above 100 agents) keeps a
// scrape within the 1 MB and allocates a bounded amount per
// scrape; full mode (the old default) is 10 MB and ~75 MB of garbage a
// scrape, which is what raised RSS: the heap after GC never grew, the
// GC's peak did.
func TestScrapeSizeAtAThousandAgents(t *testing.T) {
	m := scrapeFixture(scrapeAgents, "")
	if m.PerAgent() != PerAgentLazy {
		t.Fatalf("auto at %d agents is %q, want lazy", scrapeAgents, m.PerAgent())
	}
	count := func() (series, bytes int) {
		_, body := scrape(m.Handler(), false)
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "agent_worker_") {
				series++
			}
		}
		return series, len(body)
	}
	// Idle: agent_owned, inbox_pending, the current agent_state and two
	// next schedule runs an agent, plus the worker's own.
	series, bytes := count()
	if series > 5*scrapeAgents+100 {
		t.Errorf("idle: %d series at %d agents, want at most %d", series, scrapeAgents, 5*scrapeAgents+100)
	}
	if bytes > 1_000_000 {
		t.Errorf("idle: a scrape is %d bytes at %d agents, want at most 1,000,000", bytes, scrapeAgents)
	}
	// One turn each: a message, a wake, a model call, a tool call add
	// the eight series that counted them (received, wakes, turns, model
	// requests, input and output tokens, cost, tool calls), no more.
	activity(m, scrapeAgents)
	series, bytes = count()
	if series > 13*scrapeAgents+100 {
		t.Errorf("active: %d series at %d agents, want at most %d", series, scrapeAgents, 13*scrapeAgents+100)
	}
	if bytes > 1_100_000 {
		t.Errorf("active: a scrape is %d bytes at %d agents, want at most 1,100,000", bytes, scrapeAgents)
	}
	// Garbage per scrape (not timing: bytes allocated), gzip as
	// Prometheus asks. Full mode allocates ~75 MB.
	scrape(m.Handler(), true)
	if a := allocPerScrape(m.Handler(), 3); a > 24<<20 {
		t.Errorf("a scrape allocates %d MB at %d agents, want at most 24 MB", a>>20, scrapeAgents)
	}
}

// Scraping does not grow the live heap: after GC it is the same after 20
// scrapes of 1,000 agents as before (within 1 MB; the metrics themselves
// hold ~8 MB here). Full mode keeps it flat too (54.9 MB before and
// after in BenchmarkScrape): its RSS growth came from the garbage of each
// scrape, bounded by TestScrapeSizeAtAThousandAgents.
func TestScrapesDoNotGrowTheHeap(t *testing.T) {
	m := scrapeFixture(scrapeAgents, "")
	activity(m, scrapeAgents)
	h := m.Handler()
	scrape(h, true) // pools and lazily built state
	scrape(h, false)
	before := heapAfterGC()
	for i := range 20 {
		scrape(h, i%2 == 0)
	}
	after := heapAfterGC()
	runtime.KeepAlive(m)
	if after > before+1<<20 {
		t.Errorf("heap after GC grew from %.1f MB to %.1f MB over 20 scrapes", float64(before)/(1<<20), float64(after)/(1<<20))
	}
}
