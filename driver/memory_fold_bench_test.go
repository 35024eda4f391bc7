package driver

import (
	"fmt"
	"os"
	"testing"
	"text/tabwriter"
)

// Prices of the spend estimate: gpt-4.1-mini's list prices (guard's
// built-in table) in USD per token. Only their ratio matters here: output
// costs four times input.
const (
	benchInputUSD  = 0.40 / 1e6
	benchOutputUSD = 1.60 / 1e6
)

// BenchmarkMemoryFoldCalls runs one agent at the memory defaults
// (turn.history_turns and memory.max_tokens as a config that sets neither
// gets them) for 1000 turns of ~600-byte alerts, twice in the same run:
// folding each turn as it leaves the window (the old policy, the anchor)
// and in batches (now). It prints the fold calls per 100 turns (goal
// ≤ 10), the estimated spend of folds and of turns (tokens at four bytes
// of request or memory each, priced as gpt-4.1-mini) and their ratio
// (goal ≤ 0.10), and the largest turn request of the first and the last
// 100 turns, which show the prompt bounded as the agent ages. Batches cut
// the fold calls tenfold and, the window being shorter on average, the
// turns' spend too; the ratio lands near its goal (0.11 here, where each
// turn makes two model calls; turns that make more bring it lower),
// against 0.47 before. Run it with -benchtime 1x.
func BenchmarkMemoryFoldCalls(b *testing.B) {
	const turns = 1000
	window, maxTokens := memoryDefaults(b)
	policies := []struct {
		name string
		keep int
	}{{"one fold per turn (before)", window}, {"batch folds (now)", 0}}
	runs := make([]memoryBenchRun, len(policies))
	for range b.N {
		for i, p := range policies {
			runs[i] = runMemoryBench(b, turns, window, MemorySpec{Enabled: true, MaxTokens: maxTokens, keep: p.keep})
		}
	}
	per100 := func(r memoryBenchRun) float64 { return float64(r.folds) * 100 / turns }
	foldUSD := func(r memoryBenchRun) float64 {
		return float64(r.foldBytes)/4*benchInputUSD + float64(r.foldOut)*benchOutputUSD
	}
	turnUSD := func(r memoryBenchRun) float64 {
		return float64(r.turnBytes)/4*benchInputUSD + float64(r.turnOut)*benchOutputUSD
	}
	spend := func(r memoryBenchRun) float64 { return foldUSD(r) / turnUSD(r) }
	rows := []struct {
		name string
		val  func(memoryBenchRun) float64
		f    string
	}{
		{"fold calls", func(r memoryBenchRun) float64 { return float64(r.folds) }, "%.0f"},
		{"fold calls per 100 turns (goal ≤ 10)", per100, "%.1f"},
		{"fold input tokens (est.)", func(r memoryBenchRun) float64 { return float64(r.foldBytes) / 4 }, "%.0f"},
		{"fold output tokens", func(r memoryBenchRun) float64 { return float64(r.foldOut) }, "%.0f"},
		{"turn input tokens (est.)", func(r memoryBenchRun) float64 { return float64(r.turnBytes) / 4 }, "%.0f"},
		{"fold spend, USD (est.)", foldUSD, "%.2f"},
		{"turn spend, USD (est.)", turnUSD, "%.2f"},
		{"turns and folds, USD (est.)", func(r memoryBenchRun) float64 { return foldUSD(r) + turnUSD(r) }, "%.2f"},
		{"fold spend / turn spend (goal ≤ 0.10)", spend, "%.3f"},
		{"largest turn request bytes, turns 1-100", func(r memoryBenchRun) float64 { return float64(r.maxFirst(1, 100)) }, "%.0f"},
		{fmt.Sprintf("largest turn request bytes, turns %d-%d", turns-99, turns), func(r memoryBenchRun) float64 { return float64(r.maxFirst(turns-99, turns)) }, "%.0f"},
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%d turns, history_turns=%d, max_tokens=%d\t%s\t%s\tnow / before\t\n", turns, window, maxTokens, policies[0].name, policies[1].name)
	for _, row := range rows {
		before, now := row.val(runs[0]), row.val(runs[1])
		fmt.Fprintf(tw, "%s\t"+row.f+"\t"+row.f+"\t%.2f\t\n", row.name, before, now, now/before)
	}
	tw.Flush()
	b.ReportMetric(per100(runs[1]), "folds/100turns")
	b.ReportMetric(per100(runs[0]), "folds/100turns-before")
	b.ReportMetric(spend(runs[1]), "fold/turn-spend")
}
