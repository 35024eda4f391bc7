package worker

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// The goals table BenchmarkScale prints: a row per goal (product, anchor,
// ratio, goal, met?), its sub-rows under it ("- ...", no goal).

// scaleTable writes the rows.
type scaleTable struct {
	tw *tabwriter.Writer
	n  int
}

// row writes a goal's row; met is "" for a sub-row.
func (t scaleTable) row(what, product, anchor, ratio, goal, met string) {
	fmt.Fprintf(t.tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", what, product, anchor, ratio, goal, met)
}

// sub writes a sub-row under a goal's row.
func (t scaleTable) sub(what, product, anchor, ratio string) {
	t.row("- "+what, product, anchor, ratio, "", "")
}

// met says whether ok meets a goal stated at 10,000 agents, and says so
// when the run had another number.
func (t scaleTable) met(ok bool) string {
	s := "NO"
	if ok {
		s = "yes"
	}
	if t.n != scaleGoalAgents {
		s += fmt.Sprintf(" (at %d)", t.n)
	}
	return s
}

// yes is met for a goal that does not depend on the number of agents.
func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

func ratio(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// clipEnd keeps the last n bytes of s (an error's cause is at its end).
func clipEnd(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func kb(v float64) string { return fmt.Sprintf("%.1f KB", v/1024) }

func dur(d time.Duration) string {
	if d <= 0 {
		return "never"
	}
	return d.Round(time.Millisecond).String()
}

// per is d ÷ k, k at least 1.
func per(d time.Duration, k int64) time.Duration { return d / time.Duration(max(k, 1)) }

func printScale(o scaleOptions, s scaleRun) {
	p, bare, n := s.prod, s.bare, o.n
	t := scaleTable{tw: tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight), n: n}
	t.row(fmt.Sprintf("scale, %d agents, one process", n), "product", "anchor", "ratio", "goal", "met?")
	if p.startErr != "" {
		t.row(fmt.Sprintf("worker.Start with %d agents failed", n), p.startErr, "", "", "", "NO")
	}
	t.row("agents that work (message handled; 30s without progress or 180s end the wait)", fmt.Sprintf("%d of %d", p.working, n), fmt.Sprint(n),
		ratio(float64(p.working), float64(n)), "10,000 of 10,000", t.met(p.working == n && p.startErr == ""))
	t.sub(fmt.Sprintf("the %d probe messages, first publish → last handled (or the wait's end)", n), dur(p.probeTime), "", "")
	t.sub("the process's CPU meanwhile, % of one core (2 cores: 200% is all)", fmt.Sprintf("%.0f%%", p.probeCPU), "", "")
	if p.beforeStall >= 0 {
		t.sub(fmt.Sprintf("working when 5s first passed without progress (from %v on)", p.stallAt.Round(100*time.Millisecond)), fmt.Sprintf("%d of %d", p.beforeStall, n), "", "")
	} else {
		t.sub("working when 5s first passed without progress", "no such gap", "", "")
	}
	t.sub("probe handled by the end of the run (agents given nothing else)", fmt.Sprintf("%d of %d", p.late, p.lateOf), fmt.Sprint(p.lateOf), ratio(float64(p.late), float64(p.lateOf)))
	t.sub("agents told to wait, a dependency reported down, during the probe", fmt.Sprint(p.waitingProbe), "0", "")
	if p.waitingWhy != "" {
		t.sub("first reason to wait", clipEnd(p.waitingWhy, 90), "", "")
	}
	if p.firstDead != "" {
		t.sub("first agent not working", p.firstDead, "", "")
	}
	t.sub("ERROR lines logged by the worker", fmt.Sprint(p.errorsLogged), "0", "")
	if p.firstError != "" {
		t.sub("first ERROR", p.firstError, "", "")
	}

	rss := p.rssSlope(n)
	t.row(fmt.Sprintf("RSS per idle agent, whole process, slope %d → %d (vs a bare sleeping agent)", scaleBaseAgents, n), kb(rss), kb(bare.rssPerAgent),
		ratio(rss, bare.rssPerAgent), "≤ 50 KB", t.met(rss <= 50*1024 && p.startErr == ""))
	t.sub(fmt.Sprintf("RSS: worker %d agents → %d agents", scaleBaseAgents, n), fmt.Sprintf("%d → %d MB", p.rss10>>20, p.rssN>>20), "", "")
	gPer := float64(p.goroutinesN-p.goroutines10) / float64(n-scaleBaseAgents)
	t.sub("goroutines per idle agent", fmt.Sprintf("%.2f", gPer), fmt.Sprintf("%.2f", bare.goroutinesPer), ratio(gPer, bare.goroutinesPer))

	t.row(fmt.Sprintf("start → /readyz 200, %d agents (vs taking %d bare leases)", n, n), dur(p.ready), dur(bare.createAll),
		ratio(float64(p.ready), float64(bare.createAll)), "≤ 5 s", t.met(p.ready > 0 && p.ready <= 5*time.Second))
	t.sub(fmt.Sprintf("start → every agent owned (%d of %d; checked from ready on)", p.owned, n), dur(p.allOwned), "", "")

	t.row(fmt.Sprintf("idle CPU, %d sleeping agents, over %v, %% of one core", n, o.idle), fmt.Sprintf("%.2f%%", p.idleCPU), fmt.Sprintf("%.2f%%", bare.idleCPU),
		ratio(p.idleCPU, bare.idleCPU), "≤ 2 %", t.met(p.idleCPU <= 2 && p.startErr == ""))
	var idleOps []string
	for _, op := range sortedOps(p.idleOps) {
		idleOps = append(idleOps, fmt.Sprintf("%s %.0f", op, p.idleOps[op]))
	}
	t.sub("store round trips per second meanwhile, by op (anchor: its lease renewals)", strings.Join(idleOps, ", "), fmt.Sprintf("update %.0f", bare.renewalsPerSec), "")

	burstRow(t, o, p, bare)

	bareMsg := per(bare.burstCPU, bare.burstRead)
	one := p.cpuPerTurn()
	t.row(fmt.Sprintf("CPU per one-message turn, less the idle rate, %d agents (%d msgs, %d turns, %v) vs bare per msg", scaleBurstAgents, p.singleHandled, p.singleTurns, p.singleTime.Round(time.Millisecond)),
		one.Round(time.Microsecond).String(), bareMsg.Round(time.Microsecond).String(), ratio(float64(one), float64(bareMsg)),
		"≤ 0.4 ms", yes(p.singleTurns > 0 && one <= 400*time.Microsecond))
	t.sub(fmt.Sprintf("idle rate not taken off (the process's CPU over %v, to quiet)", p.singleCPUTime.Round(100*time.Millisecond)),
		per(p.singleCPU, p.singleTurns).Round(time.Microsecond).String(), "", "")
	perTurn := per(p.burstCPU, p.burstTurns)
	t.sub(fmt.Sprintf("CPU per burst turn (%d turns, %.0f msgs each)", p.burstTurns, float64(p.burstHandled)/float64(max(p.burstTurns, 1))),
		perTurn.Round(time.Microsecond).String(), bareMsg.Round(time.Microsecond).String(), ratio(float64(perTurn), float64(bareMsg)))
	perMsg := per(p.burstCPU, p.burstHandled)
	t.sub("CPU per handled message, burst", perMsg.Round(time.Microsecond).String(), bareMsg.Round(time.Microsecond).String(), ratio(float64(perMsg), float64(bareMsg)))

	byOp, net := p.opsPerTurn()
	// Every turn hands one summary to turnlog, whose writer appends it in
	// the background (driver/turn.go): not a round trip the turn waits for.
	sync := net - 1
	t.row(fmt.Sprintf("synchronous store round trips per one-message turn, less the idle rate (over %v), the leases' apart", p.singleOpsTime.Round(100*time.Millisecond)),
		fmt.Sprintf("%.2f", sync), "1", ratio(sync, 1), "≤ 2", yes(p.singleTurns > 0 && sync <= 2))
	t.sub("with the turn summary turnlog appends in the background (one per turn)", fmt.Sprintf("%.2f", net), "", "")
	var ops []string
	for _, op := range sortedOps(byOp) {
		ops = append(ops, fmt.Sprintf("%s %.2f", op, byOp[op]))
	}
	t.sub("by op, less the idle rate ("+leaseOp+": the leases', not summed)", strings.Join(ops, ", "), "", "")
	t.sub("all the process's, sync and background, idle rate not taken off", fmt.Sprintf("%.2f", p.opsRaw()), "", "")

	if p.steadyHeapMsgs > 0 {
		v := p.steadyHeap / float64(p.steadyHeapMsgs) / 1024
		t.row(fmt.Sprintf("heap growth per handled message (last of %d bursts, warm agents)", len(p.bursts)), fmt.Sprintf("%.3f KB", v), "0", "—", "≤ 0.05 KB", yes(v <= 0.05))
		for i, r := range p.bursts {
			what := "the same agents: histories and memories still filling"
			if i == 0 {
				what = "fresh agents: their histories and buffers grow once"
			}
			t.sub(fmt.Sprintf("burst %d (%s)", i+1, what), fmt.Sprintf("%.3f KB", r.heap/float64(max(r.done, 1))/1024), "0", "—")
		}
	} else {
		v := p.burstHeap / float64(max(p.burstHeapMsgs, 1)) / 1024
		t.row("heap growth per handled message (first burst; AW_SCALE_ROUNDS ≥ 2 adds a warm one)", fmt.Sprintf("%.3f KB", v), "0", "—", "≤ 0.05 KB", yes(p.burstHeapMsgs > 0 && v <= 0.05))
	}
	t.sub("per one-message turn", fmt.Sprintf("%.3f KB", p.singleHeap/float64(max(p.singleTurns, 1))/1024), "0", "—")

	failoverRow(t, s.fail)

	worst := max(p.renewProbe.own.p99, p.renewBursts.own.p99)
	worstShared := max(p.renewProbe.shared.p99, p.renewBursts.shared.p99)
	t.row(fmt.Sprintf("lease renewal write p99, busiest phase (%d-msg probe, bursts): its own connection vs the shared one", n),
		dur(worst), dur(worstShared), ratio(float64(worst), float64(worstShared)), "≤ "+renewGoal.String(),
		yes(p.renewProbe.own.n > 0 && worst <= renewGoal && p.renewStart.worker.slowest <= renewGoal.Seconds()))
	t.sub(fmt.Sprintf("start of %d agents (Start called → every agent restored, %v): the worker's own renewals", n, dur(p.allRestored)), p.renewStart.worker.String(), "", "")
	for _, ph := range []struct {
		what string
		r    renewPhase
	}{
		{fmt.Sprintf("the probe: %d messages, one per agent", n), p.renewProbe},
		{fmt.Sprintf("the bursts: %d × %d msgs", len(p.bursts), o.burst), p.renewBursts},
	} {
		t.sub(ph.what, ph.r.own.String(), ph.r.shared.String(), ratio(float64(ph.r.own.p99), float64(ph.r.shared.p99)))
		t.sub("  the worker's own renewals meanwhile (its histogram)", ph.r.worker.String(), "", "")
	}
	t.sub(fmt.Sprintf("idle %v: the worker's own renewals (no probe: its writes would count as the idle rate)", o.idle), p.renewIdle.worker.String(), "", "")
	t.row("agents told to wait, a dependency reported down, whole run (not a goal)", fmt.Sprint(p.waiting), "0", "", "", "")
	t.row(fmt.Sprintf("Worker.Stop, %d agents (not a goal)", n), dur(p.stop), "", "", "", "")
	t.tw.Flush()
}

// burstRow writes the burst's row (every round) and a sub-row per round.
func burstRow(t scaleTable, o scaleOptions, p prodScale, bare bareScale) {
	var pm, pt, bm, bt float64
	short := 0
	for i := range min(len(p.bursts), len(bare.bursts)) {
		pm, pt = pm+float64(p.bursts[i].done), pt+p.bursts[i].took.Seconds()
		bm, bt = bm+float64(bare.bursts[i].done), bt+bare.bursts[i].took.Seconds()
		if !p.bursts[i].purged || p.bursts[i].done < int64(o.burst) {
			short++
		}
	}
	pr, br := pm/max(pt, 1e-9), bm/max(bt, 1e-9)
	note := ""
	if short > 0 {
		note = fmt.Sprintf(" (%d rounds not all handled and purged)", short)
	}
	t.row(fmt.Sprintf("burst %d msgs → %d agents, to the last purge, msgs/s over %d rounds (ratio: product ÷ bare rate)%s", o.burst, scaleBurstAgents, len(p.bursts), note),
		fmt.Sprintf("%.0f", pr), fmt.Sprintf("%.0f", br), ratio(pr, br), "≥ 0.8", yes(short == 0 && br > 0 && pr/br >= 0.8))
	for i := range min(len(p.bursts), len(bare.bursts)) {
		pb, bb := p.bursts[i], bare.bursts[i]
		what := "fresh agents"
		if i > 0 {
			what = "the same agents again"
		}
		purged := ""
		if !pb.purged {
			purged += " (product: not purged within 60s)"
		}
		if !bb.purged {
			purged += " (bare: not purged within 60s)"
		}
		t.sub(fmt.Sprintf("round %d (%s, %d memory folds): %d handled in %v, bare %v%s", i+1, what, pb.folds, pb.done, pb.took.Round(time.Millisecond), bb.took.Round(time.Millisecond), purged),
			fmt.Sprintf("%.0f", pb.rate()), fmt.Sprintf("%.0f", bb.rate()), ratio(pb.rate(), bb.rate()))
		t.sub("  msgs/s to the last message-handled event", fmt.Sprintf("%.0f", float64(pb.done)/pb.handled.Seconds()), "", "")
		t.sub("  then until the process is quiet (not counted, at most 10s)", pb.quiet.Round(10*time.Millisecond).String(), bb.quiet.Round(10*time.Millisecond).String(), "")
	}
}

// failoverRow writes the failover's row.
func failoverRow(t scaleTable, f failoverScale) {
	goal := failoverTTL + time.Second
	what := fmt.Sprintf("failover: kill of a busy owner → its waiting message handled by the other (vs lease ttl %v)", failoverTTL)
	if f.err != "" {
		t.row(what, "not measured", failoverTTL.String(), "—", "≤ "+goal.String(), "NO")
		t.sub("why", f.err, "", "")
		return
	}
	t.row(what, dur(f.handled), failoverTTL.String(), ratio(float64(f.handled), float64(failoverTTL)), "≤ "+goal.String(), yes(f.handled <= goal))
	t.sub("measured − ttl", (f.handled - failoverTTL).Round(time.Millisecond).String(), "", "")
	t.sub("kill → the other owns the agent", dur(f.owned), "", "")
}
