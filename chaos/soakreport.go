package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agent-worker/agent-worker/internal/fakeprovider"
)

// soakResult is what a soak did and found.
type soakResult struct {
	Settings                soakSettings
	Rev                     string // the binary under test, for the report
	CPUs                    int
	Began                   time.Time
	LoadFor, Drain, Elapsed time.Duration
	Kinds                   map[string]int // acked messages by kind
	Count                   Count          // by delivery
	Doubled, Lost           []string
	// Unlogged: deliveries handled by a recorded turn whose process died
	// before it logged the turn (counted as handled).
	Unlogged []string
	// Reused lists turn numbers two completed turns of one agent logged;
	// Abandoned counts resumable turns given up waiting for their
	// messages, AbandonedDone those a completed turn had ended before.
	Reused                   []string
	Abandoned, AbandonedDone int
	Faults                   []firedFault
	// The watch's findings.
	Samples, Unowned, UnownedMax, ScrapeFailures int
	Overlaps, Violations                         []string
	Replicas                                     []replicaUsage
	Spend                                        spendCheck
	Notes, Broken                                []string
	Err                                          error
}

// replicaUsage is one replica's starts, memory and goroutines.
type replicaUsage struct {
	Name   string
	Starts int
	usage
}

// spendCheck is the spend as the workers recorded it and as the provider
// would bill it.
type spendCheck struct {
	// Stored is the agents' session spend in the store; Lives the cost
	// counters as last scraped in each process's life.
	Stored, Lives float64
	// The provider's whole answers by step, and its refusals.
	First, Second, Refused int
}

// Billed is what the provider's answers cost at the soak's prices.
func (c spendCheck) Billed() float64 {
	first := fakeprovider.FirstIn*priceIn + fakeprovider.FirstOut*priceOut
	second := fakeprovider.SecondIn*priceIn + fakeprovider.SecondOut*priceOut
	return (float64(c.First)*first + float64(c.Second)*second) / 1e6
}

// Failed reports whether the soak lost, doubled, dead-lettered or
// misdelivered a message, saw two owners of one agent, broke another
// promise, or could not be run to its end.
func (r *soakResult) Failed() bool { return len(r.failures()) > 0 }

// failures names what failed the soak.
func (r *soakResult) failures() []string {
	var out []string
	c := r.Count
	for _, f := range []struct {
		n    int
		what string
	}{{c.Lost, "lost"}, {c.Twice, "handled twice"}, {c.Dead, "dead-lettered"}, {c.Unknown, "handled by an agent not owed it"}, {len(r.Violations), "two owners at once"}, {len(r.Broken), "broken promises"}} {
		if f.n > 0 {
			out = append(out, fmt.Sprintf("%d %s", f.n, f.what))
		}
	}
	if r.Err != nil {
		out = append(out, "harness error")
	}
	return out
}

// fill copies what the soak found into out.
func (s *soak) fill(out *soakResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out.Kinds = maps.Clone(s.kinds)
	out.Count = s.led.CountFor(s.owe)
	out.Doubled = s.led.Doubled(s.owe)
	out.Unlogged = s.led.RecordedUnlogged(s.owe)
	for _, d := range s.led.UnaccountedFor(s.owe) {
		line := d.String()
		if why := s.led.LostWhy(d); why != "" {
			line += " (" + why + ")"
		}
		out.Lost = append(out.Lost, line)
	}
	out.Reused = s.led.ReusedTurns()
	out.Abandoned, out.AbandonedDone = s.led.Abandoned()
	out.Faults = s.fired
	for i := range out.Faults {
		out.Faults[i].Recovery = out.Faults[i].recovery(s.led)
	}
	out.spendGaps()
	out.Notes, out.Broken, out.Err = s.res.Notes, s.res.Broken, s.res.Err
	if w := s.watch; w != nil {
		out.Spend.Lives = w.costOfLives()
		w.mu.Lock()
		out.Samples, out.Unowned, out.UnownedMax, out.ScrapeFailures = w.samples, w.unowned, w.unownedMax, w.failed
		out.Overlaps, out.Violations = w.overlaps, w.violations
		for _, r := range s.reps {
			out.Replicas = append(out.Replicas, replicaUsage{Name: r.svc.name, Starts: len(r.svc.starts), usage: *w.stats[r.svc.name]})
		}
		w.mu.Unlock()
	}
}

// spendGaps sets each fault's SpendGap: how the difference between the
// stored spend and the provider's bill changed from just before it to
// just before the next fault, or to the end.
func (r *soakResult) spendGaps() {
	for i := range r.Faults {
		f := &r.Faults[i]
		f.SpendGap = "-"
		next, known := r.Spend.Stored-r.Spend.Billed(), r.Err == nil
		if i+1 < len(r.Faults) {
			next, known = r.Faults[i+1].gapBefore, r.Faults[i+1].gapKnown
		}
		if f.gapKnown && known {
			f.SpendGap = usd(next - f.gapBefore)
		}
	}
}

// summary is the result as rows of a two-column table.
func (r *soakResult) summary() [][]string {
	set := r.Settings
	store := "Redis (redis-server, append-only file, fsync always)"
	if set.Store == storeKV {
		store = "JetStream KV on the external nats-server"
	}
	k := r.Kinds
	deadline := fmt.Sprintf("load and faults %s, drain %s, in all %s with start-up and stop; %d CPUs",
		r.LoadFor.Round(time.Second), secs(r.Drain), r.Elapsed.Round(time.Second), r.CPUs)
	load := fmt.Sprintf("%d messages, %.1f a second: %d inbox, %d deferred, %d on %s (each owed to %s), %d in bursts, %d keep-alives; %d deliveries",
		sum(k), float64(sum(k)-k[kindBurst]-k[kindKeep])/max(r.LoadFor.Seconds(), 1), k[kindInbox], k[kindDeferred], k[kindShared], sharedPublish,
		strings.Join(numbered("a", soakAgents)[soakAgents-2:], " and "), k[kindBurst], k[kindKeep], r.Count.Published)
	owners := fmt.Sprintf("%d samples, one every %s: %d violations (two replicas holding one agent, again %s later), %d overlaps seen once; an agent held by none in %d samples (at most %d at once)",
		r.Samples, human(watchEvery), len(r.Violations), human(watchConfirm), len(r.Overlaps), r.Unowned, r.UnownedMax)
	if r.ScrapeFailures > 0 {
		owners += fmt.Sprintf("; %d questions to a live replica unanswered", r.ScrapeFailures)
	}
	sp := r.Spend
	billed := sp.Billed()
	diff := math.Round((sp.Stored-billed)*1e6) / 1e6
	if diff == 0 {
		diff = 0 // not -0
	}
	spend := fmt.Sprintf("store %s vs provider %s (%d first- and %d second-step answers × price): difference %s (%s); cost counters, last scrape of each process life: %s; %d requests refused",
		usd(sp.Stored), usd(billed), sp.First, sp.Second, usd(diff), percent(diff, billed), usd(sp.Lives), sp.Refused)
	result := "ok"
	if f := r.failures(); len(f) > 0 {
		result = "FAIL: " + strings.Join(f, ", ")
	}
	return [][]string{
		{"binary", r.Rev},
		{"store", store},
		{"seed", fmt.Sprintf("%d (again: `SOAK_SEED=%d SOAK_STORE=%s SOAK_DURATION=%s make soak`)", set.Seed, set.Seed, set.Store, set.Duration)},
		{"time", deadline},
		{"load", load},
		{"faults", r.faultCounts()},
		{"handled", fmt.Sprintf("%d of %d deliveries", r.Count.Handled, r.Count.Published)},
		{"handled twice", fmt.Sprint(r.Count.Twice)},
		{"dead-lettered", deadCell(r.Count)},
		{"lost", fmt.Sprint(r.Count.Lost)},
		{"handled by an agent not owed it", fmt.Sprint(r.Count.Unknown)},
		{"owners", owners},
		{"turn numbers used twice", fmt.Sprintf("%d (an agent's turn number logged by two completed turns; reported, not failed on)", len(r.Reused))},
		{"unfinished turns abandoned", fmt.Sprintf("%d, %d of them turns a completed-turn line had already ended (each after waiting for its messages to come again)", r.Abandoned, r.AbandonedDone)},
		{"spend", spend},
		{"result", result},
	}
}

// faultCounts renders how many faults of each kind struck: "14: burst 2, ...".
func (r *soakResult) faultCounts() string {
	n := map[string]int{}
	for _, f := range r.Faults {
		n[f.Kind]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, n[k]))
	}
	return fmt.Sprintf("%d: %s", len(r.Faults), list(parts))
}

var (
	replicaHeader = []string{"replica", "starts", "RSS MiB (first / max / after drain)", "goroutines (first / max / after drain)", "agents held at the end"}
	faultHeader   = []string{"#", "at", "fault", "cleared after", "recovery", "spend gap", "what it met"}
)

func (r *soakResult) replicaRows() [][]string {
	var rows [][]string
	for _, u := range r.Replicas {
		rows = append(rows, []string{u.Name, fmt.Sprint(u.Starts),
			fmt.Sprintf("%s / %s / %s", mib(u.rssFirst), mib(u.rssMax), mib(u.rssLast)),
			fmt.Sprintf("%d / %d / %d", u.goFirst, u.goMax, u.goLast), fmt.Sprint(len(u.heldAtLast))})
	}
	return rows
}

func (r *soakResult) faultRows() [][]string {
	var rows [][]string
	for i, f := range r.Faults {
		rows = append(rows, []string{fmt.Sprint(i + 1), clock(f.At), f.String(), secs(f.Took), f.Recovery, f.SpendGap, f.Note})
	}
	return rows
}

// details lists what the tables only count: the doubled and lost
// deliveries, the violations and overlaps (at most 20 of each), and the
// notes.
func (r *soakResult) details() []string {
	var out []string
	for _, l := range []struct {
		what  string
		items []string
	}{{"BROKEN", r.Broken}, {"handled twice", r.Doubled}, {"lost", r.Lost}, {"handled by a recorded turn never logged", r.Unlogged}, {"two owners", r.Violations}, {"overlap seen once", r.Overlaps}, {"turn number used twice", r.Reused}} {
		for i, it := range l.items {
			if i == 20 {
				out = append(out, fmt.Sprintf("%s: %d more", l.what, len(l.items)-20))
				break
			}
			out = append(out, l.what+": "+it)
		}
	}
	out = append(out, r.Notes...)
	if r.Err != nil {
		out = append(out, fmt.Sprintf("the harness could not run the soak to its end: %v", r.Err))
	}
	return out
}

// terminal renders the result for a terminal.
func (r *soakResult) terminal() string {
	var b strings.Builder
	fmt.Fprintf(&b, "SOAK ON %s, seed %d\n", strings.ToUpper(r.Settings.Store), r.Settings.Seed)
	for _, t := range []struct {
		header []string
		rows   [][]string
	}{{nil, r.summary()}, {replicaHeader, r.replicaRows()}, {faultHeader, r.faultRows()}} {
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		if t.header != nil {
			fmt.Fprintln(tw, strings.ToUpper(strings.Join(t.header, "\t")))
		}
		for _, row := range t.rows {
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		_ = tw.Flush()
		b.WriteString("\n")
	}
	for _, d := range r.details() {
		fmt.Fprintf(&b, "- %s\n", d)
	}
	return b.String()
}

// markdown renders the result as its store's block of the soak section.
func (r *soakResult) markdown() string {
	var b strings.Builder
	title := map[string]string{storeRedis: "Redis", storeKV: "JetStream KV"}[r.Settings.Store]
	fmt.Fprintf(&b, "### Soak on %s\n\n", title)
	fmt.Fprintf(&b, "Generated by `make soak` on %s against %s. Do not edit: run `make soak SOAK_STORE=%s` again.\n\n",
		r.Began.UTC().Format("2006-01-02 15:04 MST"), r.Rev, r.Settings.Store)
	b.WriteString(mdTable([]string{"measure", "value"}, r.summary()))
	b.WriteString("\n")
	b.WriteString(mdTable(replicaHeader, r.replicaRows()))
	if rows := r.faultRows(); len(rows) > 0 {
		b.WriteString("\n")
		b.WriteString(mdTable(faultHeader, rows))
	}
	if d := r.details(); len(d) > 0 {
		b.WriteString("\n")
		for _, line := range d {
			fmt.Fprintf(&b, "- %s\n", line)
		}
	}
	return b.String()
}

// mdTable renders a Markdown table, escaping the cells' pipes.
func mdTable(header []string, rows [][]string) string {
	var b strings.Builder
	line := func(cells []string) {
		esc := make([]string, len(cells))
		for i, c := range cells {
			esc[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		b.WriteString("| " + strings.Join(esc, " | ") + " |\n")
	}
	line(header)
	b.WriteString(strings.Repeat("|---", len(header)) + "|\n")
	for _, row := range rows {
		line(row)
	}
	return b.String()
}

// sum adds up the values of m.
func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// usd renders an amount to the micro-dollar: "$1.234567", "-$0.000420".
func usd(v float64) string {
	v = math.Round(v*1e6) / 1e6
	if v == 0 {
		return "$0.000000" // not "-$0.000000" for float noise below a micro-dollar
	}
	if v < 0 {
		return fmt.Sprintf("-$%.6f", -v)
	}
	return fmt.Sprintf("$%.6f", v)
}

// percent renders part of whole: "-0.04 %", "-" when whole is 0.
func percent(part, whole float64) string {
	if whole == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.2f %%", 100*part/whole)
}

// mib renders KiB as MiB with one decimal; "-" for unknown.
func mib(kib int64) string {
	if kib <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(kib)/1024)
}
