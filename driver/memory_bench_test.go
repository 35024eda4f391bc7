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
	"github.com/agent-worker/agent-worker/store/memory"
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

// BenchmarkMemoryPromptSize runs one agent with history_turns 3 and its
// running memory on (the scripted model folds) for 200 turns of ~600-byte
// alerts, and prints the size of each turn's first model request —
// system instruction with the memory, contents, tool declarations — at
// turns along the way, the memory's size, and the ratio of the last
// turn's request to the one right after the first fold, for memory bounds
// of 250 and 1000 tokens (memory.max_tokens). The prompt grows until the
// memory reaches its bound and stays there: bounded by the window plus
// max_tokens, however many turns. How much it grows after the first fold
// is the bound's size against the window's: 250 tokens are small beside
// three turns of alerts (ratio about 1.1), 1000 are not (about 1.5, flat
// from turn 25 on). Run it with -benchtime 1x.
func BenchmarkMemoryPromptSize(b *testing.B) {
	const turns, window = 200, 3
	report := []int{1, window + 2, 10, 25, 50, 100, 150, turns}
	type result struct {
		maxTokens int
		bytes     map[int]int // turn → first request's bytes
		tokens    map[int]int // turn → memory tokens when it ran
	}
	var results []result
	for _, maxTokens := range []int{250, 1000} {
		b.Run(fmt.Sprintf("max_tokens=%d", maxTokens), func(b *testing.B) {
			for range b.N {
				r := result{maxTokens: maxTokens, bytes: map[int]int{}, tokens: map[int]int{}}
				var mu sync.Mutex
				var calls int
				m, err := scripted.New("bench", config.Model{Script: benchScript, Loop: true}, scripted.WithHook(
					func(_ context.Context, req *model.LLMRequest, _ int) error {
						mu.Lock()
						defer mu.Unlock()
						calls++
						if calls%2 == 1 { // a turn's first call
							r.bytes[(calls+1)/2] = requestBytes(req)
						}
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
				d, err := New(Deps{Clock: c, Store: memory.New(c), Events: bus}, []Spec{{
					Name: "bench", Instruction: benchInstruction, Model: m,
					Tools: []string{tools.ScheduleNextTurn, tools.ReportDone},
					Sleep: tools.Sleep{Max: 24 * time.Hour}, HistoryTurns: window,
					Memory: MemorySpec{Enabled: true, MaxTokens: maxTokens},
				}})
				if err != nil {
					b.Fatal(err)
				}
				a, _ := d.Agent("bench")
				if err := d.Start(context.Background()); err != nil {
					b.Fatal(err)
				}
				wait := func(typ string, i int) {
					for e := range sub.C {
						switch e.Type {
						case typ:
							return
						case events.TurnFailed, events.MemoryCompactionFailed:
							b.Fatalf("turn %d: %s %v", i, e.Type, e.Data)
						}
					}
				}
				for i := 1; i <= turns; i++ {
					r.tokens[i] = a.MemoryTokens()
					a.Send(inbox.Message{Kind: inbox.Wake, Source: "alertmanager", Text: memoryBenchAlert(i)})
					wait(events.TurnCompleted, i)
					if i > window { // turn i-window left the window: its fold ran before the next turn
						wait(events.MemoryCompacted, i)
					}
				}
				d.Shutdown(context.Background())
				results = append(results, r)
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
			row = append(row, fmt.Sprint(r.bytes[t]), fmt.Sprint(r.tokens[t]))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	row := []string{"last / first after a fold"}
	for _, r := range results {
		row = append(row, fmt.Sprintf("%.2f", float64(r.bytes[turns])/float64(r.bytes[window+2])), "")
	}
	fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	row = []string{"last / turn 50 (memory at its bound)"}
	for _, r := range results {
		row = append(row, fmt.Sprintf("%.2f", float64(r.bytes[turns])/float64(r.bytes[50])), "")
	}
	fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	tw.Flush()
}
