package watchdog

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// seq turns letters into calls: each letter is fetch with {"id": letter}, so
// calls differ by their arguments, not their tool. Upper case marks the
// calls a case repeats, lower case the ones it uses once.
func seq(s string) []Call {
	calls := make([]Call, 0, len(s))
	for _, r := range s {
		calls = append(calls, Call{Tool: "fetch", Args: map[string]any{"id": string(r)}})
	}
	return calls
}

// distinct returns n calls no two of which are the same, over a few tools.
func distinct(n int) []Call {
	tools := []string{"http_get", "read_file", "search", "publish", "list"}
	calls := make([]Call, n)
	for i := range calls {
		calls[i] = Call{Tool: tools[i%len(tools)], Args: map[string]any{"q": fmt.Sprintf("item-%d", i), "page": i % 3}}
	}
	return calls
}

// feed runs calls through d and returns the alerts by call number (1-based).
func feed(d *Detector, calls []Call) map[int][]Alert {
	got := map[int][]Alert{}
	for i, c := range calls {
		if as := d.Call(c); len(as) > 0 {
			got[i+1] = as
		}
	}
	return got
}

func signals(got map[int][]Alert) map[int][]string {
	out := map[int][]string{}
	for n, as := range got {
		for _, a := range as {
			out[n] = append(out[n], a.Signal)
		}
	}
	return out
}

func TestDetectorCallSignals(t *testing.T) {
	t.Parallel()
	wide := Config{Window: 40} // keeps dominant out of cases about the others
	cases := []struct {
		name  string
		cfg   Config
		calls []Call
		want  map[int][]string // call number → signals that alert on it
	}{
		{"repeat below threshold", Config{}, seq("AAAA"), nil},
		{"repeat at threshold", Config{}, seq("AAAAA"), map[int][]string{5: {SignalRepeat}}},
		{"repeat alerts once while it holds", Config{}, seq("AAAAAAA"), map[int][]string{5: {SignalRepeat}}},
		{"repeat broken before threshold", Config{}, seq("AAAABAAAA"), nil},
		{"repeat re-arms after a different call", wide, seq("AAAAAAABAAAAA"), map[int][]string{5: {SignalRepeat}, 13: {SignalRepeat}}},
		{"repeat threshold from config", Config{Repeat: 3}, seq("AAbAAA"), map[int][]string{6: {SignalRepeat}}},
		{"same args different tools", Config{}, []Call{
			{Tool: "a", Args: map[string]any{"x": 1}}, {Tool: "b", Args: map[string]any{"x": 1}},
			{Tool: "c", Args: map[string]any{"x": 1}}, {Tool: "d", Args: map[string]any{"x": 1}},
			{Tool: "e", Args: map[string]any{"x": 1}}, {Tool: "f", Args: map[string]any{"x": 1}},
		}, nil},
		{"same tool different args", Config{}, seq("abcdefgh"), nil},
		{"cycle of two not before the sixth call", Config{}, seq("ABABA"), nil},
		{"cycle of two on the sixth call", Config{}, seq("ABABAB"), map[int][]string{6: {SignalCycle}}},
		{"cycle alerts once while it holds", wide, seq("ABABABABABA"), map[int][]string{6: {SignalCycle}}},
		{"cycle re-arms after it breaks", wide, seq("ABABABAB" + "C" + "ABABAB"), map[int][]string{6: {SignalCycle}, 15: {SignalCycle}}},
		{"cycle of three", Config{}, seq("ABCABCABC"), map[int][]string{9: {SignalCycle}}},
		{"cycle of three with a call twice", Config{}, seq("AABAABAAB"), map[int][]string{9: {SignalCycle}}},
		{"cycle of four", Config{}, seq("ABCDABCDABCD"), map[int][]string{12: {SignalCycle}}},
		{"cycle repeats from config", Config{CycleRepeats: 2}, seq("ABCABC"), map[int][]string{6: {SignalCycle}}},
		{"cycle of five is not looked for", wide, seq("ABCDEABCDEABCDE"), nil},
		{"near-miss cycles", Config{}, seq("ABcABdABeABfABgABh"), nil},
		{"thirty distinct calls", Config{}, distinct(30), nil},
		{"dominant 8 of 12 interleaved", Config{}, seq("AAbAAcAAdAAe"), map[int][]string{12: {SignalDominant}}},
		{"dominant waits for a full window", Config{}, seq("AAbAAcAAdAA"), nil},
		{"dominant alerts once while it holds", Config{}, seq("AAbAAcAAdAAeA"), map[int][]string{12: {SignalDominant}}},
		{"dominant re-arms below the threshold", Config{}, seq("AAbAAcAAdAAefAA"), map[int][]string{12: {SignalDominant}, 15: {SignalDominant}}},
		{"dominant when the window fills on another call", Config{}, seq("AAAAbAAAAcde"), map[int][]string{12: {SignalDominant}}},
		{"dominant from config", Config{Dominant: 3, Window: 5}, seq("AbAcA"), map[int][]string{5: {SignalDominant}}},
		{"one call throughout", Config{}, seq("AAAAAAAAAAAAAA"), map[int][]string{5: {SignalRepeat}, 12: {SignalDominant}}},
		{"cycle and dominant together", Config{}, seq("AAABAAABAAAB"), map[int][]string{12: {SignalCycle, SignalDominant}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := signals(feed(NewDetector(tc.cfg), tc.calls))
			want := tc.want
			if want == nil {
				want = map[int][]string{}
			}
			if !maps.EqualFunc(got, want, slices.Equal) {
				t.Errorf("alerts by call = %v, want %v", got, want)
			}
		})
	}
}

func TestDetectorSameCall(t *testing.T) {
	t.Parallel()
	decode := func(s string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	cases := []struct {
		name string
		a, b map[string]any
		same bool
	}{
		{"key order", decode(`{"url":"https://x","n":1}`), decode(`{"n":1,"url":"https://x"}`), true},
		{"nested key order", decode(`{"q":{"a":1,"b":[1,{"y":2,"x":3}]}}`), decode(`{"q":{"b":[1,{"x":3,"y":2}],"a":1}}`), true},
		{"int 1 and float 1.0", map[string]any{"n": 1}, decode(`{"n":1.0}`), true},
		{"nil and empty", nil, map[string]any{}, true},
		{"different value", decode(`{"url":"https://x"}`), decode(`{"url":"https://y"}`), false},
		{"number and string", map[string]any{"n": 1}, map[string]any{"n": "1"}, false},
		{"extra key", decode(`{"a":1}`), decode(`{"a":1,"b":null}`), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Alternate a and b: five in a row are a repeat only if they
			// are the same call.
			d := NewDetector(Config{})
			var got []Alert
			for i := range 5 {
				args := tc.a
				if i%2 == 1 {
					args = tc.b
				}
				got = d.Call(Call{Tool: "http_get", Args: args})
			}
			if same := len(got) == 1 && got[0].Signal == SignalRepeat; same != tc.same {
				t.Errorf("fifth call alerts %v; want same call = %v", got, tc.same)
			}
		})
	}
}

func TestDetectorPatternAndCounts(t *testing.T) {
	t.Parallel()
	a := Call{Tool: "http_get", Args: map[string]any{"url": "https://x?a=1&b=2"}}
	b := Call{Tool: "read_file", Args: map[string]any{"path": "/tmp/a"}}
	c := Call{Tool: "search", Args: map[string]any{"q": "disk", "limit": 5}}
	const pa, pb, pc = `http_get {"url":"https://x?a=1&b=2"}`, `read_file {"path":"/tmp/a"}`, `search {"limit":5,"q":"disk"}`
	x := func(i int) Call { return Call{Tool: "list", Args: map[string]any{"i": i}} }
	cases := []struct {
		name    string
		calls   []Call
		at      int
		signal  string
		count   int
		pattern string
	}{
		{"repeat", []Call{a, a, a, a, a}, 5, SignalRepeat, 5, pa},
		{"cycle of two", []Call{a, b, a, b, a, b}, 6, SignalCycle, 6, pa + " → " + pb},
		{"cycle starting mid-stream", []Call{c, b, a, b, a, b, a}, 7, SignalCycle, 6, pb + " → " + pa},
		{"cycle of three", []Call{a, b, c, a, b, c, a, b, c}, 9, SignalCycle, 9, pa + " → " + pb + " → " + pc},
		{"dominant", []Call{a, a, x(1), a, a, x(2), a, a, x(3), a, a, x(4)}, 12, SignalDominant, 8, pa},
		{"dominant counts all it has", []Call{a, a, a, a, x(1), a, a, a, a, x(2), a, x(3)}, 12, SignalDominant, 9, pa},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := feed(NewDetector(Config{}), tc.calls)
			as := got[tc.at]
			if len(got) != 1 || len(as) != 1 {
				t.Fatalf("alerts by call = %v, want one %s on call %d", got, tc.signal, tc.at)
			}
			al := as[0]
			if al.Signal != tc.signal || al.Calls != tc.count || al.Pattern != tc.pattern || !al.Blocking {
				t.Errorf("alert = %+v, want signal %s, calls %d, pattern %q, blocking", al, tc.signal, tc.count, tc.pattern)
			}
			if !strings.Contains(al.Model, tc.pattern) || !strings.Contains(al.Operator, tc.pattern) {
				t.Errorf("texts do not name the pattern %q:\nmodel: %s\noperator: %s", tc.pattern, al.Model, al.Operator)
			}
			if !strings.Contains(al.Operator, fmt.Sprint(tc.count)) {
				t.Errorf("operator text %q lacks the count %d", al.Operator, tc.count)
			}
		})
	}
}

func TestDetectorPatternTruncated(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 200) // two bytes each: byte 117 falls mid-rune
	d := NewDetector(Config{Repeat: 2})
	d.Call(Call{Tool: "write_file", Args: map[string]any{"t": long}})
	as := d.Call(Call{Tool: "write_file", Args: map[string]any{"t": long}})
	if len(as) != 1 {
		t.Fatalf("alerts = %v, want one repeat", as)
	}
	args, ok := strings.CutPrefix(as[0].Pattern, "write_file ")
	if !ok || len(args) > maxArgsBytes || !strings.HasSuffix(args, "…") || !utf8.ValidString(args) || !strings.HasPrefix(args, `{"t":"éé`) {
		t.Errorf("pattern args = %q (%d bytes), want valid UTF-8 of at most %d bytes ending in …", args, len(args), maxArgsBytes)
	}
}

func TestDetectorFailures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		cfg     Config
		results string // F failed, S succeeded, per call
		same    bool   // every call the same (else all different)
		want    []int  // call numbers whose Result alerts
	}{
		{"below the streak", Config{}, "FFSFF", false, nil},
		{"at the streak", Config{}, "FFF", false, []int{3}},
		{"once while it holds", Config{}, "FFFFFF", false, []int{3}},
		{"re-arms after a success", Config{}, "FFFFSFFF", false, []int{3, 8}},
		{"same call failing", Config{Repeat: 50}, "FFF", true, []int{3}},
		{"streak from config", Config{Failures: 1}, "FSF", false, []int{1, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := NewDetector(tc.cfg)
			var got []int
			for i, r := range tc.results {
				c := distinct(len(tc.results))[i]
				if tc.same {
					c = Call{Tool: "http_get", Args: map[string]any{"url": "https://x"}}
				}
				if as := d.Call(c); len(as) > 0 {
					t.Fatalf("call %d: unexpected alerts %v", i+1, as)
				}
				as := d.Result(r == 'F')
				if len(as) == 0 {
					continue
				}
				got = append(got, i+1)
				a := as[0]
				if len(as) != 1 || a.Signal != SignalFailures || a.Blocking || a.Calls != d.cfg.Failures || a.Pattern != describe(d.at(i)) {
					t.Errorf("call %d: alerts %+v, want one non-blocking failures alert of %d calls naming the last call", i+1, as, d.cfg.Failures)
				}
				if tc.same != strings.Contains(a.Operator, "same tool call") || !strings.Contains(a.Operator, fmt.Sprint(a.Calls)) && a.Calls > 1 {
					t.Errorf("call %d: operator text %q; want the count and that the same call failed = %v", i+1, a.Operator, tc.same)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("failures alerts on calls %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDetectorReset(t *testing.T) {
	t.Parallel()
	d := NewDetector(Config{})
	feed(d, seq("AAAA"))
	d.Result(true)
	d.Result(true)
	d.Reset()
	if got := signals(feed(d, seq("A"))); len(got) != 0 {
		t.Errorf("after Reset, one more call alerted %v", got)
	}
	if got := d.Result(true); got != nil {
		t.Errorf("after Reset, one more failure alerted %v", got)
	}
	// Repeat and dominant have alerted; Reset re-arms them without a break.
	d.Reset()
	feed(d, seq("AAAAAAAAAAAA"))
	d.Reset()
	want := map[int][]string{5: {SignalRepeat}, 12: {SignalDominant}}
	if got := signals(feed(d, seq("AAAAAAAAAAAA"))); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("after Reset, alerts by call = %v, want %v", got, want)
	}
}

func TestDetectorZeroValue(t *testing.T) {
	t.Parallel()
	var d Detector
	d.Reset()
	want := map[int][]string{5: {SignalRepeat}}
	if got := signals(feed(&d, seq("AAAAA"))); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("zero Detector: alerts by call = %v, want %v (defaults)", got, want)
	}
}

// TestDetectorModelText checks every signal's texts: Model names the
// pattern, says repeating will not help, and never mentions what the model
// must not know about.
func TestDetectorModelText(t *testing.T) {
	t.Parallel()
	forbidden := []string{"operator", "reset", "halt", "api"}
	var all []Alert
	for _, calls := range [][]Call{seq("AAAAA"), seq("ABABAB"), seq("AAbAAcAAdAAe")} {
		for _, as := range feed(NewDetector(Config{}), calls) {
			all = append(all, as...)
		}
	}
	for _, same := range []bool{true, false} {
		d := NewDetector(Config{Repeat: 50})
		for i, c := range distinct(3) {
			if same {
				c = seq("A")[0]
			}
			d.Call(c)
			if as := d.Result(true); i == 2 {
				all = append(all, as...)
			}
		}
	}
	seen := map[string]int{}
	for _, a := range all {
		seen[a.Signal]++
		low := strings.ToLower(a.Model)
		for _, w := range forbidden {
			if strings.Contains(low, w) {
				t.Errorf("%s model text mentions %q: %s", a.Signal, w, a.Model)
			}
		}
		if !strings.Contains(a.Model, a.Pattern) || !strings.Contains(a.Model, "will not change") {
			t.Errorf("%s model text does not name %q and say repeating will not change the result: %s", a.Signal, a.Pattern, a.Model)
		}
		if a.Operator == "" || strings.Contains(strings.ToLower(a.Operator), "you") {
			t.Errorf("%s operator text is empty or addresses the agent: %q", a.Signal, a.Operator)
		}
	}
	want := map[string]int{SignalRepeat: 1, SignalCycle: 1, SignalDominant: 1, SignalFailures: 2}
	if !maps.Equal(seen, want) {
		t.Errorf("alerts checked by signal = %v, want %v", seen, want)
	}
}

// TestDetectorMemoryBounded runs a long turn and checks the Detector holds
// no more than its largest detector needs.
func TestDetectorMemoryBounded(t *testing.T) {
	t.Parallel()
	d := NewDetector(Config{})
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		d.Call(Call{Tool: "fetch", Args: map[string]any{"id": rng.IntN(1000), "i": i % 7}})
		if i%3 == 0 {
			d.Result(rng.IntN(2) == 0)
		}
	}
	c := d.cfg
	if limit := max(c.Repeat, 4*c.CycleRepeats, c.Window); len(d.ring) > limit {
		t.Errorf("keeps %d calls, want at most %d", len(d.ring), limit)
	}
	if len(d.counts) > c.Window || len(d.dominantOn) > c.Window/c.Dominant {
		t.Errorf("counts %d distinct calls, %d dominant; want at most %d and %d", len(d.counts), len(d.dominantOn), c.Window, c.Window/c.Dominant)
	}
}

// naive is the definition of each signal, recomputed from the whole
// history on every call; the Detector must agree with it.
type naive struct {
	cfg        Config
	hist       []string
	repeatOn   bool
	cycleOn    bool
	dominantOn map[string]bool
}

func (n *naive) call(c Call) (alerts []string, counts []int) {
	b, _ := json.Marshal(c.Args)
	if len(c.Args) == 0 {
		b = []byte("{}")
	}
	n.hist = append(n.hist, c.Tool+" "+string(b))
	h := n.hist
	last := func(m int) []string { return h[len(h)-m:] }
	allSame := func(s []string) bool {
		for _, x := range s {
			if x != s[0] {
				return false
			}
		}
		return true
	}

	repeat := len(h) >= n.cfg.Repeat && allSame(last(n.cfg.Repeat))
	if repeat && !n.repeatOn {
		alerts, counts = append(alerts, SignalRepeat), append(counts, n.cfg.Repeat)
	}
	n.repeatOn = repeat

	cycleLen := 0
	for k := 2; k <= 4 && cycleLen == 0; k++ {
		r := n.cfg.CycleRepeats
		if len(h) < k*r || allSame(last(k)) {
			continue
		}
		s, unit := last(k*r), last(k)
		ok := true
		for i := range s {
			ok = ok && s[i] == unit[i%k]
		}
		if ok {
			cycleLen = k
		}
	}
	if cycleLen > 0 && !n.cycleOn {
		alerts, counts = append(alerts, SignalCycle), append(counts, cycleLen*n.cfg.CycleRepeats)
	}
	n.cycleOn = cycleLen > 0

	now := map[string]bool{}
	if len(h) >= n.cfg.Window {
		win := last(n.cfg.Window)
		count := map[string]int{}
		for _, x := range win {
			count[x]++
		}
		for _, x := range win {
			if count[x] >= n.cfg.Dominant {
				if !now[x] && !n.dominantOn[x] {
					alerts, counts = append(alerts, SignalDominant), append(counts, count[x])
				}
				now[x] = true
			}
		}
	}
	n.dominantOn = now
	return alerts, counts
}

func TestDetectorMatchesNaive(t *testing.T) {
	t.Parallel()
	configs := []Config{{}, {Repeat: 3, CycleRepeats: 2, Dominant: 3, Window: 6}, {Dominant: 4, Window: 8}, {Window: 3, Dominant: 2}}
	for ci, cfg := range configs {
		for alphabet := 2; alphabet <= 5; alphabet++ {
			t.Run(fmt.Sprintf("config %d alphabet %d", ci, alphabet), func(t *testing.T) {
				t.Parallel()
				d := NewDetector(cfg)
				ref := &naive{cfg: d.cfg}
				rng := rand.New(rand.NewPCG(uint64(ci), uint64(alphabet)))
				fired := map[string]int{}
				for i := range 5000 {
					if rng.IntN(500) == 0 {
						d.Reset()
						ref = &naive{cfg: d.cfg}
					}
					// Runs of one call and stretches of one short cycle make
					// the patterns appear, break and appear again.
					var v int
					switch i / 50 % 3 {
					case 0:
						v = rng.IntN(alphabet)
					case 1:
						v = i / 7 % alphabet
						if rng.IntN(10) == 0 {
							v = rng.IntN(alphabet)
						}
					default:
						v = i % (2 + i/150%3)
						if rng.IntN(15) == 0 {
							v = rng.IntN(alphabet)
						}
					}
					c := Call{Tool: "fetch", Args: map[string]any{"id": v}}
					var got []string
					var gotCounts []int
					for _, a := range d.Call(c) {
						got, gotCounts = append(got, a.Signal), append(gotCounts, a.Calls)
					}
					want, wantCounts := ref.call(c)
					if !slices.Equal(got, want) || !slices.Equal(gotCounts, wantCounts) {
						t.Fatalf("call %d (%v): alerts %v %v, want %v %v; recent %v", i, v, got, gotCounts, want, wantCounts, ref.hist[max(0, len(ref.hist)-16):])
					}
					for _, sig := range got {
						fired[sig]++
					}
				}
				for _, sig := range []string{SignalRepeat, SignalCycle, SignalDominant} {
					if fired[sig] == 0 {
						t.Errorf("no %s alert in the stream (%v): it does not exercise the detectors", sig, fired)
					}
				}
				t.Logf("alerts: %v", fired)
			})
		}
	}
}

// BenchmarkDetectorCall reports the time per Call on a 1,000-call varied
// stream (a few tools, mostly distinct arguments, some repeats and
// cycles), run 100 times per iteration so a -benchtime 1x run is steady.
func BenchmarkDetectorCall(b *testing.B) {
	const calls, rounds = 1000, 100
	tools := []string{"http_get", "read_file", "search", "publish", "list", "schedule_next_turn"}
	rng := rand.New(rand.NewPCG(7, 7))
	stream := make([]Call, calls)
	for i := range stream {
		n := rng.IntN(400)
		if i%50 >= 40 { // a burst of a short loop now and then
			n = i % 3
		}
		stream[i] = Call{Tool: tools[n%len(tools)], Args: map[string]any{
			"url":  fmt.Sprintf("https://example.com/items/%d?page=%d", n, n%5),
			"page": n % 5,
			"opts": map[string]any{"verbose": n%2 == 0, "limit": 50},
		}}
	}
	d := NewDetector(Config{})
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		alerts := 0
		start := time.Now()
		for range rounds {
			d.Reset()
			for _, c := range stream {
				alerts += len(d.Call(c))
			}
		}
		per := float64(time.Since(start).Nanoseconds()) / (calls * rounds)
		b.ReportMetric(per, "ns/call")
		fmt.Printf("detector: %d calls × %d rounds, %.0f ns/call, %d alerts per round\n", calls, rounds, per, alerts/rounds)
	}
}
