package watchdog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agent-worker/agent-worker/internal/textclip"
)

// Call is one tool call: its tool name and arguments.
//
// Two calls are the same call when their tools are equal and their
// arguments encode to the same canonical JSON (encoding/json of the map,
// which sorts object keys at every level). So arguments that differ only in
// key order are the same, and so are the numbers 1 and 1.0: arguments
// decoded from JSON hold float64, and an int 1 and a float64 1.0 both encode
// as 1. A nil map and an empty map are the same (no arguments). Arguments
// encoding/json cannot encode (NaN, channels, cycles) are compared by their
// fmt rendering instead, which also sorts map keys.
type Call struct {
	Tool string
	Args map[string]any
}

// Signals name the kinds of pattern the Detector reports. They are a fixed
// set, so they can be a metric label.
const (
	SignalRepeat   = "repeat"   // the same call N times in a row
	SignalCycle    = "cycle"    // a cycle of 2–4 calls repeated K times
	SignalDominant = "dominant" // one call takes ≥ D of the last W calls
	SignalFailures = "failures" // a streak of F failing calls (warning only)
)

// Config sets the thresholds of a Detector. A zero (or negative) field takes
// its default: Repeat 5, CycleRepeats 3, Dominant 8, Window 12, Failures 3,
// TurnRepeat 5.
// Values that would make a signal fire on every call are raised to the
// smallest meaningful one: Repeat, CycleRepeats and Dominant to 2,
// and Window to Dominant (a window smaller than the threshold could never
// fire).
type Config struct {
	// Repeat: the same call this many times in a row.
	Repeat int
	// CycleRepeats: a sequence of 2, 3 or 4 calls (not all the same call)
	// repeated this many times in a row.
	CycleRepeats int
	// Dominant of the last Window calls being one call. Checked only once
	// Window calls have been made.
	Dominant int
	Window   int
	// Failures: this many failing calls in a row (a warning, never
	// blocking).
	Failures int
	// TurnRepeat: the same calls in this many eager turns in a row (a
	// Watchdog signal across turns; the Detector ignores it).
	TurnRepeat int
}

// Defaults for a zero Config field.
const (
	defaultRepeat       = 5
	defaultCycleRepeats = 3
	defaultDominant     = 8
	defaultWindow       = 12
	defaultFailures     = 3
)

// Cycles are looked for with lengths minCycle..maxCycle calls.
const (
	minCycle = 2
	maxCycle = 4
)

// maxArgsBytes bounds each call's arguments in an Alert's texts, so a huge
// argument (a file's content) can't flood logs, events or the prompt.
const maxArgsBytes = 120

// withDefaults returns c with every zero field defaulted and every field
// raised to its minimum.
func (c Config) withDefaults() Config {
	def := func(v *int, d, lo int) {
		if *v <= 0 {
			*v = d
		}
		*v = max(*v, lo)
	}
	def(&c.Repeat, defaultRepeat, 2)
	def(&c.CycleRepeats, defaultCycleRepeats, 2)
	def(&c.Dominant, defaultDominant, 2)
	def(&c.Window, defaultWindow, c.Dominant)
	def(&c.Failures, defaultFailures, 1)
	def(&c.TurnRepeat, defaultTurnRepeat, 2)
	return c
}

// Alert is a pattern that just appeared.
type Alert struct {
	// Signal is one of the Signal constants.
	Signal string
	// Calls is how many calls make up the pattern (e.g. 5 for five
	// repeats, 6 for a 2-call cycle seen 3 times, 8 for a call that took 8
	// of the last 12, 3 for three failures in a row).
	Calls int
	// Pattern names the repeated call(s) for people: e.g.
	// `http_get {"url":"https://x"}`, or `a {…} → b {…}` for a cycle, or the
	// most recent failing call; each call's arguments are cut to at most
	// 120 bytes (ending in "…" when cut).
	Pattern string
	// Model is the text the model is shown as feedback: what it is
	// repeating, and that repeating a call will not change its result. It
	// never mentions operators, resets, the API or halting; the only part
	// not written here is Pattern, the model's own calls.
	Model string
	// Operator is the text for logs and events: an agent-neutral
	// description of the pattern with its counts.
	Operator string
	// Blocking is false for warning-only signals (failures) and true for
	// the others.
	Blocking bool
}

// Detector watches one turn's tool calls for loops: the same call
// repeated, a short cycle of calls repeated, one call dominating the recent
// calls, and a streak of failures.
//
// Each signal alerts once when its pattern appears and not again while the
// pattern holds; it re-arms when the pattern breaks (for dominant, per
// call: when that call drops below the threshold in the window). Memory is
// bounded: a Detector keeps only the last max(Window, 4) calls and a count
// per distinct call among the last Window, however long the turn.
//
// A Detector is not safe for concurrent use; the caller serialises. The
// zero Detector works with the default Config; NewDetector sets another.
type Detector struct {
	cfg Config

	// ring holds the most recent calls: call i (0-based, counted since the
	// last Reset) is ring[i%len(ring)], kept while i ≥ total-len(ring).
	ring  []entry
	total int

	// run is how many calls in a row, ending with the latest, are the
	// same call.
	run int
	// match[k] is how many calls in a row, ending with the latest, equal
	// the call k before them: the last k*r calls are one k-call sequence
	// repeated r times exactly when match[k] ≥ k*(r-1).
	match [maxCycle + 1]int

	// counts holds, for each distinct call among the last Window, how many
	// times it occurs there.
	counts map[entry]int

	// Whether each pattern held after the previous call (it has alerted
	// and is not re-armed); dominantOn lists the calls that have.
	repeatOn   bool
	cycleOn    bool
	dominantOn []entry
	failOn     bool

	failStreak int
	failSame   bool  // every failing call in the streak was the same call
	failLast   entry // the most recent failing call

	buf bytes.Buffer
	enc *json.Encoder
}

// entry is a call as compared: its tool and canonical arguments.
type entry struct {
	tool, args string
}

// NewDetector returns a Detector with the thresholds of c (zero fields
// defaulted, see Config).
func NewDetector(c Config) *Detector {
	d := &Detector{}
	d.init(c)
	return d
}

func (d *Detector) init(c Config) {
	d.cfg = c.withDefaults()
	d.ring = make([]entry, max(d.cfg.Window, maxCycle))
	d.counts = make(map[entry]int, d.cfg.Window)
	d.enc = json.NewEncoder(&d.buf)
	d.enc.SetEscapeHTML(false) // an URL's & stays readable in Pattern
}

// Call records a call and returns the alerts that appeared with it, in the
// order repeat, cycle, dominant (nil when none). Arguments are compared as
// canonical JSON; see Call for what counts as the same call.
func (d *Detector) Call(c Call) []Alert {
	if d.ring == nil {
		d.init(Config{})
	}
	e := entry{tool: c.Tool, args: d.canonical(c.Args)}
	n := d.total

	// Compare with the calls before this one while they are still in the
	// ring: the slot this call takes may hold the call Window back.
	if n >= 1 && d.at(n-1) == e {
		d.run++
	} else {
		d.run = 1
	}
	for k := minCycle; k <= maxCycle; k++ {
		if n >= k && d.at(n-k) == e {
			d.match[k]++
		} else {
			d.match[k] = 0
		}
	}
	if n >= d.cfg.Window {
		old := d.at(n - d.cfg.Window)
		if d.counts[old] <= 1 {
			delete(d.counts, old)
		} else {
			d.counts[old]--
		}
	}
	d.ring[n%len(d.ring)] = e
	d.counts[e]++
	d.total++

	var alerts []Alert
	if a, ok := d.checkRepeat(e); ok {
		alerts = append(alerts, a)
	}
	if a, ok := d.checkCycle(); ok {
		alerts = append(alerts, a)
	}
	return d.checkDominant(e, alerts)
}

// Result records whether the most recent call failed and returns the
// failures alert if the streak just reached Config.Failures (nil
// otherwise). A success ends the streak and re-arms the alert. Call Result
// at most once per Call; calls whose result is never recorded neither
// extend nor end a streak.
func (d *Detector) Result(failed bool) []Alert {
	if d.ring == nil {
		d.init(Config{})
	}
	if !failed {
		d.failStreak, d.failOn = 0, false
		return nil
	}
	var last entry
	if d.total > 0 {
		last = d.at(d.total - 1)
	}
	d.failStreak++
	if d.failStreak == 1 {
		d.failSame = true
	} else if last != d.failLast {
		d.failSame = false
	}
	d.failLast = last
	if d.failStreak < d.cfg.Failures || d.failOn {
		return nil
	}
	d.failOn = true
	n, p := d.failStreak, describe(last)
	a := Alert{Signal: SignalFailures, Calls: n, Pattern: p, Blocking: false}
	switch {
	case n == 1: // Config.Failures 1
		a.Model = fmt.Sprintf("Your last tool call failed: %s. "+
			"Retrying it unchanged will not change its result. "+
			"Read the error, change the arguments or try another way, or answer with what you know so far.", p)
		a.Operator = fmt.Sprintf("a tool call failed: %s", p)
	case d.failSame:
		a.Model = fmt.Sprintf("The same tool call has failed %d times in a row: %s. "+
			"Retrying it unchanged will not change its result. "+
			"Read the error, change the arguments or try another way, or answer with what you know so far.", n, p)
		a.Operator = fmt.Sprintf("the same tool call failed %d times in a row: %s", n, p)
	default:
		a.Model = fmt.Sprintf("Your last %d tool calls failed (the most recent: %s). "+
			"Retrying a failing call unchanged will not change its result. "+
			"Read the errors, change the arguments or try another way, or answer with what you know so far.", n, p)
		a.Operator = fmt.Sprintf("%d tool calls failed in a row (most recent: %s)", n, p)
	}
	return []Alert{a}
}

// Reset forgets every call, streak and alert, as at the start of a turn;
// the Config stays.
func (d *Detector) Reset() {
	if d.ring == nil {
		return
	}
	clear(d.ring)
	clear(d.counts)
	d.total, d.run, d.match = 0, 0, [maxCycle + 1]int{}
	d.repeatOn, d.cycleOn, d.dominantOn, d.failOn = false, false, d.dominantOn[:0], false
	d.failStreak, d.failSame, d.failLast = 0, false, entry{}
}

// at returns call i; only the last len(d.ring) calls are kept.
func (d *Detector) at(i int) entry { return d.ring[i%len(d.ring)] }

func (d *Detector) checkRepeat(e entry) (Alert, bool) {
	holds := d.run >= d.cfg.Repeat
	fire := holds && !d.repeatOn
	d.repeatOn = holds
	if !fire {
		return Alert{}, false
	}
	n, p := d.cfg.Repeat, describe(e)
	return Alert{
		Signal:  SignalRepeat,
		Calls:   n,
		Pattern: p,
		Model: fmt.Sprintf("You have made the same tool call %d times in a row: %s. "+
			"Repeating a call with the same arguments will not change its result. "+
			"Use the result you already have, change the arguments or the approach, or answer with what you know so far.", n, p),
		Operator: fmt.Sprintf("the same tool call was made %d times in a row: %s", n, p),
		Blocking: true,
	}, true
}

func (d *Detector) checkCycle() (Alert, bool) {
	r := d.cfg.CycleRepeats
	k := 0 // the shortest cycle that holds: its length is the true period
	for c := minCycle; c <= maxCycle; c++ {
		// The last c calls all the same call is a repeat, not a cycle.
		if d.match[c] >= c*(r-1) && d.run < c {
			k = c
			break
		}
	}
	holds := k > 0
	fire := holds && !d.cycleOn
	d.cycleOn = holds
	if !fire {
		return Alert{}, false
	}
	parts := make([]string, k)
	for i := range k {
		parts[i] = describe(d.at(d.total - k + i))
	}
	p := strings.Join(parts, " → ")
	return Alert{
		Signal:  SignalCycle,
		Calls:   k * r,
		Pattern: p,
		Model: fmt.Sprintf("You are going in a circle: the same %d tool calls have come %d times in a row, in the same order: %s. "+
			"Repeating these calls will not change their results. "+
			"Use the results you already have, try a different approach, or answer with what you know so far.", k, r, p),
		Operator: fmt.Sprintf("a cycle of %d tool calls was repeated %d times in a row (%d calls): %s", k, r, k*r, p),
		Blocking: true,
	}, true
}

// checkDominant appends to alerts an alert for each call that just came to
// take Dominant or more of the last Window calls.
func (d *Detector) checkDominant(e entry, alerts []Alert) []Alert {
	w, dom := d.cfg.Window, d.cfg.Dominant
	if d.total < w {
		return alerts
	}
	// Re-arm the calls that fell below the threshold.
	on := d.dominantOn[:0]
	for _, x := range d.dominantOn {
		if d.counts[x] >= dom {
			on = append(on, x)
		}
	}
	d.dominantOn = on
	// Only the latest call's count grew, so only it can newly cross the
	// threshold — except when the window first fills, when any call can.
	cands := []entry{e}
	if d.total == w {
		cands = make([]entry, 0, w)
		for i := d.total - w; i < d.total; i++ {
			cands = append(cands, d.at(i))
		}
	}
	for _, x := range cands {
		n := d.counts[x]
		if n < dom || d.dominant(x) {
			continue
		}
		d.dominantOn = append(d.dominantOn, x)
		p := describe(x)
		alerts = append(alerts, Alert{
			Signal:  SignalDominant,
			Calls:   n,
			Pattern: p,
			Model: fmt.Sprintf("%d of your last %d tool calls were the same call: %s. "+
				"Calling it again with the same arguments will not change its result. "+
				"Use the result you already have, try a different approach, or answer with what you know so far.", n, w, p),
			Operator: fmt.Sprintf("one tool call took %d of the last %d tool calls: %s", n, w, p),
			Blocking: true,
		})
	}
	return alerts
}

// dominant reports whether x has alerted as dominant and still is.
func (d *Detector) dominant(x entry) bool {
	for _, y := range d.dominantOn {
		if y == x {
			return true
		}
	}
	return false
}

// canonical returns args as canonical JSON: object keys sorted at every
// level (encoding/json sorts map keys), HTML characters left unescaped.
func (d *Detector) canonical(args map[string]any) string {
	if len(args) == 0 {
		return "{}"
	}
	d.buf.Reset()
	if err := d.enc.Encode(args); err != nil {
		return fmt.Sprint(args) // fmt sorts map keys too; never valid JSON, so no clash
	}
	return string(bytes.TrimSuffix(d.buf.Bytes(), []byte("\n")))
}

// describe renders a call for people: its tool and its arguments, each cut
// to maxArgsBytes.
func describe(e entry) string {
	if e.tool == "" && e.args == "" {
		return "(unknown call)"
	}
	return textclip.BytesWithin(e.tool, maxArgsBytes, "…") + " " + textclip.BytesWithin(e.args, maxArgsBytes, "…")
}
