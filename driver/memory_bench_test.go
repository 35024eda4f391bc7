package driver

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"google.golang.org/adk/model"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/models/scripted"
	"github.com/agent-worker/agent-worker/store/memstore"
	"github.com/agent-worker/agent-worker/tools"
)

// memoryBenchAlert is an alert as Alertmanager's receiver renders it:
// about 600 bytes, different every turn.
func memoryBenchAlert(i int) string {
	return fmt.Sprintf("[FIRING:1] HighLatency payments-api (severity=page, cluster=eu-%d)\n"+
		"summary: p99 latency of payments-api above 800ms for 10m on pod payments-api-%d\n"+
		"description: Requests to /v1/charge take %dms at the 99th percentile; the SLO is 800ms. "+
		"Upstream dependency ledger-db shows connection pool saturation (%d of 50 connections in use). "+
		"Runbook: https://runbooks.example.com/payments/high-latency\n"+
		"startsAt: 2026-11-29T08:%02d:00Z  generator: prometheus  fingerprint: %08x", i%4, i, 800+i%400, 40+i%10, i%60, i*7919)
}

// memoryBenchRun is what runMemoryBench measured of one agent.
type memoryBenchRun struct {
	// first[t] is the size of turn t's first model request (from 1):
	// system instruction with the memory, contents, tool declarations;
	// tokens[t] the memory's estimated tokens when it ran.
	first, tokens map[int]int
	// turnBytes sums every model request of the turns; turnOut their
	// output tokens as the script reports them.
	turnBytes, turnOut int
	// folds counts the fold calls, foldBytes their requests' sizes and
	// foldOut the tokens of the memories they wrote (their output).
	folds, foldBytes, foldOut int
}

// runMemoryBench runs one agent with a history window of window turns and
// its running memory (the scripted model folds) for turns turns of
// ~600-byte alerts, one at a time, on the real clock and an in-memory
// store, and measures its prompts and folds.
func runMemoryBench(b *testing.B, turns, window int, mem MemorySpec) memoryBenchRun {
	r := memoryBenchRun{first: map[int]int{}, tokens: map[int]int{}}
	var mu sync.Mutex
	var calls int
	var a *Agent
	m, err := scripted.New("bench", config.Model{Script: benchScript, Loop: true}, scripted.WithHook(
		func(_ context.Context, req *model.LLMRequest, _ int) error {
			size := requestBytes(req)
			mu.Lock()
			defer mu.Unlock()
			r.turnBytes += size
			r.turnOut += benchScript[calls%len(benchScript)].Usage.Output
			calls++
			if calls%2 == 1 { // a turn's first call: the fold before it is done
				t := (calls + 1) / 2
				r.first[t], r.tokens[t] = size, a.MemoryTokens()
			}
			return nil
		}), scripted.WithFoldHook(func(_ context.Context, req *model.LLMRequest, _ int) error {
		size := requestBytes(req)
		mu.Lock()
		defer mu.Unlock()
		r.folds++
		r.foldBytes += size
		return nil
	}))
	if err != nil {
		b.Fatal(err)
	}
	c := clock.Real()
	bus := events.NewBus(0, nil)
	sub := bus.Subscribe(64, func(e events.Event) bool {
		return e.Type == events.TurnCompleted || e.Type == events.TurnFailed ||
			e.Type == events.MemoryCompacted || e.Type == events.MemoryCompactionFailed
	})
	d, err := New(Deps{Clock: c, Store: memstore.New(c), Events: bus}, []Spec{{
		Name: "bench", Instruction: benchInstruction, Model: m,
		Tools: []string{tools.ScheduleNextTurn, tools.ReportDone},
		Sleep: tools.Sleep{Max: 24 * time.Hour}, HistoryTurns: window, Memory: mem,
	}})
	if err != nil {
		b.Fatal(err)
	}
	a, _ = d.Agent("bench")
	if err := d.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	for i := 1; i <= turns; i++ {
		a.Send(inbox.Message{Kind: inbox.Wake, Source: "alertmanager", Text: memoryBenchAlert(i)})
	wait:
		for e := range sub.C {
			switch e.Type {
			case events.TurnCompleted:
				break wait
			case events.MemoryCompacted:
				r.foldOut += e.Data["tokens"].(int)
			default:
				b.Fatalf("turn %d: %s %v", i, e.Type, e.Data)
			}
		}
	}
	d.Shutdown(context.Background())
	return r
}

// maxFirst is the largest first request of turns from to to.
func (r memoryBenchRun) maxFirst(from, to int) int {
	n := 0
	for t := from; t <= to; t++ {
		n = max(n, r.first[t])
	}
	return n
}

// BenchmarkMemoryPromptSize runs one agent with history_turns 3 and its
// running memory on (the scripted model folds) for 200 turns of ~600-byte
// alerts, and prints the size of each turn's first model request —
// system instruction with the memory, contents, tool declarations — at
// turns along the way, the memory's size, the largest request of the
// first and of the second hundred turns, and ratios, for memory bounds
// of 250 and 1000 tokens (memory.max_tokens). Folds come in batches (every
// third turn, all but the newest turn), so the request saws between one
// recent turn and three; it grows until the memory reaches its bound and
// stays there: bounded by the window plus max_tokens, however many turns
// (largest of turns 101–200 / of turns 1–100: 1.00). Run it with
// -benchtime 1x.
func BenchmarkMemoryPromptSize(b *testing.B) {
	const turns, window = 200, 3
	report := []int{1, window + 2, 10, 25, 50, 100, 150, turns}
	type result struct {
		maxTokens int
		memoryBenchRun
	}
	var results []result
	for _, maxTokens := range []int{250, 1000} {
		b.Run(fmt.Sprintf("max_tokens=%d", maxTokens), func(b *testing.B) {
			for range b.N {
				results = append(results, result{maxTokens, runMemoryBench(b, turns, window, MemorySpec{Enabled: true, MaxTokens: maxTokens})})
			}
		})
	}
	if len(results) == 0 {
		return
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{fmt.Sprintf("%d turns, history_turns=%d", turns, window)}
	for _, r := range results {
		head = append(head, fmt.Sprintf("request bytes (max_tokens=%d)", r.maxTokens), "memory tokens")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, t := range report {
		row := []string{fmt.Sprintf("turn %d", t)}
		if t == window+2 {
			row[0] += " (first after a fold)"
		}
		for _, r := range results {
			row = append(row, fmt.Sprint(r.first[t]), fmt.Sprint(r.tokens[t]))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	rows := []struct {
		name string
		val  func(memoryBenchRun) string
	}{
		{"largest, turns 1-100", func(r memoryBenchRun) string { return fmt.Sprint(r.maxFirst(1, 100)) }},
		{"largest, turns 101-200", func(r memoryBenchRun) string { return fmt.Sprint(r.maxFirst(101, turns)) }},
		{"largest 101-200 / largest 1-100", func(r memoryBenchRun) string {
			return fmt.Sprintf("%.2f", float64(r.maxFirst(101, turns))/float64(r.maxFirst(1, 100)))
		}},
		{"last / first after a fold", func(r memoryBenchRun) string {
			return fmt.Sprintf("%.2f", float64(r.first[turns])/float64(r.first[window+2]))
		}},
		{"last / turn 50 (memory at its bound)", func(r memoryBenchRun) string {
			return fmt.Sprintf("%.2f", float64(r.first[turns])/float64(r.first[50]))
		}},
	}
	for _, row := range rows {
		cells := []string{row.name}
		for _, r := range results {
			cells = append(cells, row.val(r.memoryBenchRun), "")
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	tw.Flush()
}
