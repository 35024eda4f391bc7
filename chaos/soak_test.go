package main

import (
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	testReplicas = []string{"r1", "r2", "r3"}
	testAgents   = numbered("a", soakAgents)
)

// The same seed gives the same faults; another seed others.
func TestFaultPickerRepeatsItsSeed(t *testing.T) {
	t.Parallel()
	draw := func(seed uint64) []fault {
		p := newFaultPicker(seed, storeRedis, testReplicas, testAgents)
		out := make([]fault, 50)
		for i := range out {
			out[i] = p.next()
		}
		return out
	}
	a, b, c := draw(42), draw(42), draw(43)
	if !slices.Equal(a, b) {
		t.Fatalf("seed 42 drew two sequences:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Fatal("seeds 42 and 43 drew the same faults")
	}
}

// Every kind is drawn, within its ranges, and Redis outages only with the
// redis store.
func TestFaultPickerKindsAndRanges(t *testing.T) {
	t.Parallel()
	within := func(d time.Duration, r [2]time.Duration) bool { return d >= r[0] && d <= r[1] }
	for _, store := range []string{storeRedis, storeKV} {
		p := newFaultPicker(7, store, testReplicas, testAgents)
		seen := map[string]int{}
		for range 500 {
			f := p.next()
			seen[f.Kind]++
			if !within(f.Gap, spanGap) {
				t.Fatalf("%s: gap %v outside %v", store, f.Gap, spanGap)
			}
			ok := true
			switch f.Kind {
			case faultKill, faultTerm:
				ok = within(f.For, spanReplicaDown) && slices.Contains(testReplicas, f.Replica)
			case faultStop:
				ok = within(f.For, spanStopped) && slices.Contains(testReplicas, f.Replica)
			case faultStarve:
				ok = within(f.For, spanStarved) && slices.Contains(testReplicas, f.Replica)
			case faultNATS:
				ok = within(f.For, spanNATSDown)
			case faultRedis:
				ok = within(f.For, spanRedisDown)
			case faultProvider:
				ok = within(f.For, spanProviderDown) && (f.Status == http.StatusTooManyRequests || f.Status == http.StatusInternalServerError)
			case faultPause:
				ok = within(f.For, spanPaused) && slices.Contains(testAgents, f.Agent)
			case faultBurst:
				ok = slices.Contains(testAgents, f.Agent)
			default:
				ok = false
			}
			if !ok {
				t.Fatalf("%s: fault out of its ranges: %+v", store, f)
			}
		}
		want := []string{faultKill, faultTerm, faultNATS, faultProvider, faultPause, faultBurst, faultStop, faultStarve}
		if store == storeRedis {
			want = append(want, faultRedis)
		}
		for _, k := range want {
			if seen[k] == 0 {
				t.Errorf("%s: %q never drawn in 500 faults: %v", store, k, seen)
			}
		}
		if store == storeKV && seen[faultRedis] > 0 {
			t.Errorf("kv: %d Redis outages drawn", seen[faultRedis])
		}
	}
}

func TestSoakSettingsFrom(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 123456789)
	for _, c := range []struct {
		env     map[string]string
		want    soakSettings
		wantErr string
	}{
		{env: nil, want: soakSettings{Seed: 123456789, Duration: 10 * time.Minute, Store: storeRedis}},
		{env: map[string]string{"SOAK_SEED": "42", "SOAK_DURATION": "2m", "SOAK_STORE": "kv"}, want: soakSettings{Seed: 42, Duration: 2 * time.Minute, Store: storeKV}},
		{env: map[string]string{"SOAK_SEED": " 7 ", "SOAK_STORE": "redis"}, want: soakSettings{Seed: 7, Duration: 10 * time.Minute, Store: storeRedis}},
		{env: map[string]string{"SOAK_SEED": "-1"}, wantErr: "SOAK_SEED"},
		{env: map[string]string{"SOAK_DURATION": "10"}, wantErr: "SOAK_DURATION"},
		{env: map[string]string{"SOAK_DURATION": "-1m"}, wantErr: "SOAK_DURATION"},
		{env: map[string]string{"SOAK_STORE": "memory"}, wantErr: "SOAK_STORE"},
	} {
		got, err := soakSettingsFrom(func(k string) string { return c.env[k] }, now)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%v: error %v, want one naming %s", c.env, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%v: %+v, %v; want %+v", c.env, got, err, c.want)
		}
	}
}

// Every agent gets every kind of the steady load, and the shared subject's
// messages are owed to both agents binding it.
func TestSteadyMessage(t *testing.T) {
	t.Parallel()
	shared := testAgents[soakAgents-2:]
	got := map[string]map[string]int{} // agent → kind → deliveries
	for i := range 7 * soakAgents {
		kind, m := steadyMessage(i, testAgents)
		for _, a := range owedTo(m, shared) {
			if got[a] == nil {
				got[a] = map[string]int{}
			}
			got[a][kind]++
		}
		if kind == kindShared && (m.subject != sharedPublish || m.agent != "") {
			t.Fatalf("message %d: shared kind, message %+v", i, m)
		}
		if kind == kindDeferred && !m.deferred {
			t.Fatalf("message %d: deferred kind, message %+v", i, m)
		}
	}
	for _, a := range testAgents {
		if got[a][kindInbox] == 0 || got[a][kindDeferred] == 0 {
			t.Errorf("%s got %v: every agent gets inbox and deferred messages", a, got[a])
		}
	}
	if got[shared[0]][kindShared] != soakAgents || got[shared[1]][kindShared] != soakAgents || got[testAgents[0]][kindShared] != 0 {
		t.Errorf("shared deliveries: %v", got)
	}
}

// accounting is three turns' logs: a11 handles s1 (shared) twice, a12
// never; a01 handles m1 once and m2, which was for a02; a03 dead-letters
// d1; a04 drops m4.
const accounting = `{"time":"2026-12-01T10:00:00.0Z","msg":"turn completed","agent":"a11","turn":1,"ids":["soak-s0001"]}
{"time":"2026-12-01T10:00:01.0Z","msg":"turn completed","agent":"a11","turn":2,"ids":["soak-s0001"]}
{"time":"2026-12-01T10:00:02.0Z","msg":"turn completed","agent":"a01","turn":7,"ids":["soak-m0001","soak-m0002"]}
{"time":"2026-12-01T10:00:03.0Z","msg":"message rejected to the dead-letter subject","agent":"a03","id":"soak-d0001","reason":"too_large"}
{"time":"2026-12-01T10:00:04.0Z","msg":"message dropped","agent":"a04","id":"soak-m0004","reason":"inbox full"}
`

func TestCountForAccountsEachAgentsDelivery(t *testing.T) {
	t.Parallel()
	l := NewLedger()
	l.Consume([]byte(accounting), "r1")
	o := owed{
		"soak-s0001": {"a11", "a12"},
		"soak-m0001": {"a01"},
		"soak-m0002": {"a02"},
		"soak-d0001": {"a03"},
		"soak-m0004": {"a04"},
	}
	c := l.CountFor(o)
	want := Count{Published: 6, Handled: 2, Twice: 1, Dead: 1, Lost: 3, Dropped: 1, Unknown: 1}
	if c.Published != want.Published || c.Handled != want.Handled || c.Twice != want.Twice || c.Dead != want.Dead ||
		c.Lost != want.Lost || c.Dropped != want.Dropped || c.Unknown != want.Unknown || c.Reasons["too_large"] != 1 {
		t.Fatalf("count %+v, want %+v", c, want)
	}
	// Counted by id, the same logs show nothing lost of s1 and m2.
	if idc := l.Count([]string{"soak-s0001", "soak-m0002"}); idc.Lost != 0 {
		t.Fatalf("by id: %+v", idc)
	}
	left := l.UnaccountedFor(o)
	if want := []delivery{{"a02", "soak-m0002"}, {"a04", "soak-m0004"}, {"a12", "soak-s0001"}}; !slices.Equal(left, want) {
		t.Fatalf("unaccounted %v, want %v", left, want)
	}
	d := l.Doubled(o)
	if len(d) != 1 || d[0] != "soak-s0001 to a11: turn 1 on r1 at 10:00:00.000, turn 2 on r1 at 10:00:01.000" {
		t.Fatalf("doubled %q", d)
	}
}

func TestSpendBilled(t *testing.T) {
	t.Parallel()
	// 100 in and 20 out, then 200 in and 10 out, at $2 and $8 a million.
	got := spendCheck{First: 1000, Second: 1000}.Billed()
	if want := 1000 * (100*2.0 + 20*8 + 200*2 + 10*8) / 1e6; math.Abs(got-want) > 1e-12 {
		t.Fatalf("billed %v, want %v", got, want)
	}
	if s := usd(-0.00042); s != "-$0.000420" {
		t.Fatalf("usd %q", s)
	}
	if s := clock(3*time.Minute + 7400*time.Millisecond); s != "03:07" {
		t.Fatalf("clock %q", s)
	}
}

// The scenarios' report keeps the soak's section; a soak replaces its own
// store's block and keeps the other's and the rest of the file.
func TestSoakSectionSurvivesBothWriters(t *testing.T) {
	t.Parallel()
	chaos1 := "# Reliability under faults\n\nscenario table 1\n"
	doc := spliceSoak(chaos1, storeRedis, "### Soak on Redis\n\nredis run 1\n")
	if !strings.HasPrefix(doc, chaos1) || !strings.Contains(doc, "redis run 1") || !strings.Contains(doc, "## Soak") {
		t.Fatalf("first soak:\n%s", doc)
	}
	doc = spliceSoak(doc, storeKV, "### Soak on JetStream KV\n\nkv run 1\n")
	doc = spliceSoak(doc, storeRedis, "### Soak on Redis\n\nredis run 2\n")
	if strings.Contains(doc, "redis run 1") || !strings.Contains(doc, "redis run 2") || !strings.Contains(doc, "kv run 1") {
		t.Fatalf("after a kv run and a second redis run:\n%s", doc)
	}
	if strings.Index(doc, "redis run 2") > strings.Index(doc, "kv run 1") {
		t.Fatalf("redis's block after kv's:\n%s", doc)
	}
	if strings.Count(doc, soakBegin) != 1 || strings.Count(doc, "\n## Soak\n") != 1 {
		t.Fatalf("the section twice:\n%s", doc)
	}
	chaos2 := "# Reliability under faults\n\nscenario table 2\n"
	again := withSoak(chaos2, doc)
	if !strings.HasPrefix(again, chaos2) || strings.Contains(again, "scenario table 1") || soakSection(again) != soakSection(doc) {
		t.Fatalf("the scenarios' rewrite:\n%s", again)
	}
	if withSoak(chaos2, chaos1) != chaos2 {
		t.Fatal("a report without a soak section gained one")
	}
}

// afterOutage is two replicas' logs around a store outage: r3's turn 378
// of a01 fails, r1 acks its message as handled by that turn, then both
// log a turn 379 of a01, and a resumable turn is abandoned twice.
var afterOutage = map[string]string{
	"r3": `{"time":"2026-12-02T03:10:41.1Z","msg":"turn failed","agent":"a01","turn":378,"outcome":"unavailable","error":"record turn: connection refused"}
{"time":"2026-12-02T03:11:23.0Z","msg":"turn completed","agent":"a01","turn":379,"ids":["soak-k0012"]}
{"time":"2026-12-02T03:11:30.0Z","msg":"unfinished turn abandoned: its messages did not come back in time","agent":"a01","journal_turn":379,"missing":1}
`,
	"r1": `{"time":"2026-12-02T03:10:50.0Z","msg":"message already handled by a recorded turn; acked without a second turn","agent":"a01","id":"soak-m6583","turn":378}
{"time":"2026-12-02T03:10:51.2Z","msg":"turn completed","agent":"a01","turn":379,"ids":["soak-m6604"]}
{"time":"2026-12-02T03:10:52.0Z","msg":"unfinished turn abandoned: its messages did not come back in time","agent":"a02","journal_turn":5,"missing":1}
`,
}

func TestLedgerTellsWhatBecameOfTheLost(t *testing.T) {
	t.Parallel()
	l := NewLedger()
	for _, src := range []string{"r3", "r1"} {
		l.Consume([]byte(afterOutage[src]), src)
	}
	why := l.LostWhy(delivery{"a01", "soak-m6583"})
	if !strings.HasPrefix(why, "acked as handled by recorded turn 378, which r3 logged as failed at 03:10:41.100 (unavailable: ") {
		t.Fatalf("why lost: %q", why)
	}
	if why := l.LostWhy(delivery{"a02", "soak-m6583"}); why != "" {
		t.Fatalf("another agent's delivery: %q", why)
	}
	reused := l.ReusedTurns()
	if len(reused) != 1 || reused[0] != "a01 turn 379: turn 379 on r1 at 03:10:51.200, turn 379 on r3 at 03:11:23.000" {
		t.Fatalf("reused %q", reused)
	}
	if n, done := l.Abandoned(); n != 2 || done != 1 {
		t.Fatalf("abandoned %d, %d of them completed before; want 2 and 1", n, done)
	}
}
