package worker

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// BenchmarkSpread prints, for 1, 2 and 3 replicas of 30 agents on one
// external nats-server (lease ttl 3s, heartbeat 200ms, turns of 700ms,
// a message every 40ms round-robin): the agents each replica owns, how
// long after the last start every agent had its one owner, and — killing
// the last replica (its NATS connection cut) and starting it again — how
// long until its agents were owned by the others, and until it had its
// share back (each handover waits for the running turn). Run it with
// -benchtime 1x.
func BenchmarkSpread(b *testing.B) {
	type row struct {
		replicas          int
		owned             string
		start, kill, join time.Duration
		killOwned         string
	}
	var rows []row
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			for range b.N {
				c := newFleet(b, 30, "10s")
				holders := make([]string, n)
				for i := range holders {
					holders[i] = fmt.Sprintf("r%d", i+1)
				}
				var last time.Time
				for _, h := range holders {
					last = time.Now()
					c.start(h)
				}
				even := func(m int) (int, int) { return 30 / m, (30 + m - 1) / m }
				lo, hi := even(n)
				load, _ := c.waitSpread("start", deadline, lo, hi)
				r := row{replicas: n, owned: loads(load), start: time.Since(last)}
				if n > 1 {
					stop := make(chan struct{})
					loaded := c.load(40*time.Millisecond, stop)
					victim := holders[n-1]
					c.kill(victim)
					lo, hi = even(n - 1)
					load, r.kill = c.waitSpread("kill", deadline, lo, hi)
					r.killOwned = loads(load)
					joined := time.Now()
					c.start(victim)
					lo, hi = even(n)
					c.waitSpread("join", deadline, lo, hi)
					r.join = time.Since(joined)
					close(stop)
					<-loaded
				}
				rows = append(rows, r)
			}
		})
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "replicas\tagents owned\tspread after last start\tafter a kill: owned\trebalanced\tafter a join: rebalanced\t")
	for _, r := range rows {
		kill, killOwned, join := "—", "—", "—"
		if r.replicas > 1 {
			kill, killOwned, join = r.kill.Round(time.Millisecond).String(), r.killOwned, r.join.Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%d\t%s\t%v\t%s\t%s\t%s\t\n", r.replicas, r.owned, r.start.Round(time.Millisecond), killOwned, kill, join)
	}
	tw.Flush()
}

// loads renders each replica's count of owned agents, by replica name.
func loads(load map[string]int) string {
	var hs []string
	for h := range load {
		hs = append(hs, h)
	}
	slices.Sort(hs)
	var parts []string
	for _, h := range hs {
		parts = append(parts, fmt.Sprintf("%s:%d", h, load[h]))
	}
	return strings.Join(parts, " ")
}
