package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sample is a worker log as the harness finds it: a turn handling two
// messages, a dead letter, a failed turn, a message handled again by a
// second turn after a restart, and a last line cut by kill -9.
const sample = `{"time":"2026-11-30T08:00:00.1Z","level":"INFO","msg":"worker started","agents":1}
{"time":"2026-11-30T08:00:01.0Z","level":"INFO","msg":"turn started","agent":"a1","turn":1,"messages":2}
{"time":"2026-11-30T08:00:01.2Z","level":"INFO","msg":"turn completed","agent":"a1","turn":1,"messages":2,"ids":["s1-m0001","s1-m0002"],"text":"handled"}
{"time":"2026-11-30T08:00:01.3Z","level":"WARN","msg":"message rejected to the dead-letter subject","agent":"a1","id":"s1-m0003","subject":"agents.a1.inbox","reason":"too_large","detail":"body of 70000 bytes","dlq":"agents.a1.dlq"}
{"time":"2026-11-30T08:00:01.4Z","level":"WARN","msg":"turn failed","agent":"a1","turn":2,"outcome":"shutdown","error":"worker stopping","messages_requeued":1}
{"time":"2026-11-30T08:00:01.5Z","level":"WARN","msg":"message dropped","agent":"a1","id":"s1-m0005","reason":"failed 3 turns"}
{"time":"2026-11-30T08:00:02.0Z","level":"INFO","msg":"turn completed","agent":"a1","turn":3,"messages":1,"ids":["s1-m0002"],"text":"handled"}
{"time":"2026-11-30T08:00:02.1Z","level":"WARN","msg":"turn throttled","agent":"a1","reason":"turns_per_hour","turns":120,"pause":17965861049}
{"time":"2026-11-30T08:00:02.5Z","level":"INFO","msg":"duplicate of a handled message; acked without a turn","agent":"a1","id":"s1-m0001","deliveries":2}
{"time":"2026-11-30T08:00:03.0Z","level":"INFO","msg":"turn completed","agent":"a1","turn":4,"messages":1,"ids":["s1-m00`

func TestLedgerCounts(t *testing.T) {
	l := NewLedger()
	used := l.Consume([]byte(sample), "r1")
	if want := strings.LastIndexByte(sample, '\n') + 1; used != want {
		t.Fatalf("consumed %d bytes, want %d (up to the cut line)", used, want)
	}
	published := []string{"s1-m0001", "s1-m0002", "s1-m0003", "s1-m0004", "s1-m0005"}
	c := l.Count(published)
	want := Count{Published: 5, Handled: 2, Twice: 1, Dead: 1, Lost: 2, Dropped: 1}
	if c.Published != want.Published || c.Handled != want.Handled || c.Twice != want.Twice ||
		c.Dead != want.Dead || c.Lost != want.Lost || c.Dropped != want.Dropped || c.Unknown != 0 {
		t.Fatalf("count %+v, want %+v", c, want)
	}
	if c.Reasons["too_large"] != 1 || len(c.Reasons) != 1 {
		t.Fatalf("reasons %v", c.Reasons)
	}
	if n := l.Unaccounted(published); n != 2 {
		t.Fatalf("unaccounted %d, want 2 (m0004 never seen, m0005 dropped)", n)
	}
	if f := l.Failed(); len(f) != 1 || f[0] != (OutcomeCount{"shutdown", 1, "worker stopping"}) {
		t.Fatalf("failed %v", f)
	}
	if th := l.Throttled(); len(th) != 1 || th[0] != (OutcomeCount{Outcome: "turns_per_hour", N: 1}) {
		t.Fatalf("throttled %v", th)
	}
	if l.duplicates != 1 || l.malformed != 0 {
		t.Fatalf("duplicates %d, malformed %d", l.duplicates, l.malformed)
	}
	if n := l.Count(published[:1]).Unknown; n != 1 {
		t.Fatalf("unknown %d: s1-m0002 was handled but not in the published list", n)
	}
}

func TestLedgerTimes(t *testing.T) {
	l := NewLedger()
	l.Consume([]byte(sample), "r1")
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	c, ok := l.FirstCompletion(at("2026-11-30T08:00:01.5Z"), []string{"a1"}, "")
	if !ok || c.Turn != 3 {
		t.Fatalf("first completion after 01.5: %+v %v", c, ok)
	}
	if _, ok := l.FirstCompletion(at("2026-11-30T08:00:01.5Z"), nil, "r2"); ok {
		t.Fatal("a completion on r2, which logged none")
	}
	if last, ok := l.HandledAll([]string{"s1-m0001", "s1-m0002"}); !ok || !last.Equal(at("2026-11-30T08:00:01.2Z")) {
		t.Fatalf("handled all at %v %v, want the first turn's time", last, ok)
	}
	if _, ok := l.HandledAll([]string{"s1-m0001", "s1-m0004"}); ok {
		t.Fatal("s1-m0004 was never handled")
	}
	if n := l.Turns("a1", at("2026-11-30T08:00:00Z"), at("2026-11-30T08:00:02Z")); n != 1 {
		t.Fatalf("turns in [0, 2s): %d, want 1", n)
	}
	if s := l.LastSource("a1"); s != "r1" {
		t.Fatalf("last source %q", s)
	}
}

// TestTailRestart follows a log that a killed process left with a cut
// line and its restarted successor continued after ensureNewline.
func TestTailRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "worker.log")
	cut := `{"time":"2026-11-30T08:00:01Z","level":"INFO","msg":"turn completed","agent":"a1","turn":1,"ids":["s2-m0001"]}` + "\n" +
		`{"time":"2026-11-30T08:00:02Z","level":"INFO","msg":"turn comp`
	if err := os.WriteFile(path, []byte(cut), 0o644); err != nil {
		t.Fatal(err)
	}
	l := NewLedger()
	tail := NewTail(l)
	tail.Add(path, "r1")
	tail.Add(filepath.Join(t.TempDir(), "not-yet.log"), "r2")
	if err := tail.Poll(); err != nil {
		t.Fatal(err)
	}
	if err := ensureNewline(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"time":"2026-11-30T08:00:03Z","level":"INFO","msg":"turn completed","agent":"a1","turn":1,"ids":["s2-m0002","s2-m0001"]}` + "\n")
	f.Close()
	if err := tail.Poll(); err != nil {
		t.Fatal(err)
	}
	c := l.Count([]string{"s2-m0001", "s2-m0002"})
	if c.Handled != 2 || c.Twice != 1 || c.Lost != 0 {
		t.Fatalf("count %+v", c)
	}
	if l.malformed != 1 {
		t.Fatalf("malformed %d, want 1 (the cut line, ended by ensureNewline)", l.malformed)
	}
}

// handover is two replicas' logs around a join: r2 hands a1 over to r1
// once its running turn completed, a turn of a2 fails when r2 loses its
// lease, and r1 takes a3 over from a dead r3.
const handover = `{"time":"2026-11-30T09:00:00.0Z","level":"INFO","msg":"handing agent over: no new turn starts here; a running turn may finish","agent":"a1","to":"r1"}
{"time":"2026-11-30T09:00:00.1Z","level":"INFO","msg":"turn completed","agent":"a1","turn":7,"messages":1,"ids":["s6-m0001"],"text":"handled"}
{"time":"2026-11-30T09:00:00.2Z","level":"INFO","msg":"agent handed over: lease released","agent":"a1","to":"r1"}
{"time":"2026-11-30T09:00:01.0Z","level":"WARN","msg":"agent no longer owned here","agent":"a2","reason":"lost","holder":"r2"}
{"time":"2026-11-30T09:00:01.1Z","level":"WARN","msg":"turn failed","agent":"a2","turn":3,"outcome":"shutdown","error":"lease lost: this replica no longer owns the agent","messages_requeued":1}
`

func TestLedgerLeases(t *testing.T) {
	l := NewLedger()
	l.Consume([]byte(handover), "r2")
	l.Consume([]byte(`{"time":"2026-11-30T09:00:02.0Z","level":"INFO","msg":"lease taken over","agent":"a3","holder":"r1","previous":"r3","expired":"2026-11-30T09:00:01.9Z"}`+"\n"), "r1")
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	all := l.LeaseChangesSince(time.Time{}, "")
	want := []LeaseChange{
		{Time: at("2026-11-30T09:00:00.0Z"), Kind: leaseHandingOver, Msg: msgHandingOver, Agent: "a1", Source: "r2", Peer: "r1"},
		{Time: at("2026-11-30T09:00:00.2Z"), Kind: leaseHandedOver, Msg: msgHandedOver, Agent: "a1", Source: "r2", Peer: "r1"},
		{Time: at("2026-11-30T09:00:01.0Z"), Kind: leaseLost, Msg: msgAgentLetGo, Agent: "a2", Source: "r2"},
		{Time: at("2026-11-30T09:00:02.0Z"), Kind: leaseTakenOver, Msg: msgTakenOver, Agent: "a3", Source: "r1", Peer: "r3"},
	}
	if len(all) != len(want) {
		t.Fatalf("lease changes %+v, want %+v", all, want)
	}
	for i := range want {
		if all[i] != want[i] {
			t.Fatalf("lease change %d: %+v, want %+v", i, all[i], want[i])
		}
	}
	if got := l.LeaseChangesSince(at("2026-11-30T09:00:00.5Z"), leaseTakenOver); len(got) != 1 || got[0].Agent != "a3" {
		t.Fatalf("taken over after 00.5: %+v", got)
	}
	if n := l.CompletedOn("a1", "r2", all[0].Time, all[1].Time); n != 1 {
		t.Fatalf("turns of a1 on r2 during its handover: %d, want 1", n)
	}
	if n := l.CompletedOn("a1", "r1", all[0].Time, all[1].Time); n != 0 {
		t.Fatalf("turns of a1 on r1 during the handover: %d, want 0", n)
	}
	f := l.FailuresSince(at("2026-11-30T09:00:00.5Z"))
	if len(f) != 1 || f[0].Agent != "a2" || f[0].Outcome != "shutdown" || f[0].Source != "r2" {
		t.Fatalf("failures since 00.5: %+v", f)
	}
	if len(l.FailuresSince(at("2026-11-30T09:00:01.1Z"))) != 0 {
		t.Fatal("a failure after its own time")
	}
	if h, ok := l.HandledAt("s6-m0001"); !ok || !h.Equal(at("2026-11-30T09:00:00.1Z")) {
		t.Fatalf("handled at %v %v", h, ok)
	}
}

func TestOwners(t *testing.T) {
	holders := []string{"r1", "r2", "r3"}
	o := owners{"a1": "r1", "a2": "r2", "a3": "r2", "a4": "r3", "a5": "r2"}
	if got := o.spread(holders); got != "r1 1, r2 3, r3 1" {
		t.Fatalf("spread %q", got)
	}
	if got := o.busiest(holders); got != "r2" {
		t.Fatalf("busiest %q", got)
	}
	if got := list(o.of("r2")); got != "a2, a3, a5" {
		t.Fatalf("of r2: %q", got)
	}
	if !spreadOver(holders, 1, 3)(o) || spreadOver(holders, 2, 3)(o) {
		t.Fatal("spreadOver: 1, 3, 1 is within 1–3 and not within 2–3")
	}
	if !o.ownedBy(holders) || o.ownedBy([]string{"r1", "r3"}) {
		t.Fatal("ownedBy")
	}
	o["a6"] = ""
	if o.ownedBy(holders) || spreadOver(holders, 0, 5)(o) {
		t.Fatal("an agent without an owner is owned by none of the holders")
	}
	if got := o.describe([]string{"a6", "a1", "a7"}); got != "a6 none, a1 r1, a7 not answered" {
		t.Fatalf("describe %q", got)
	}
	if got := (owners{"a1": "r1", "a2": "r2"}).busiest(holders); got != "r1" {
		t.Fatalf("busiest on a tie: %q, want the first", got)
	}
}

// A turn whose process was killed between its record and its "turn
// completed" line handled its messages: a later process life numbers the
// agent's turns on from it. One that logged its failure, or after which
// no life went past its number, did not.
func TestLedgerCountsARecordedTurnWhoseLineWasLost(t *testing.T) {
	l := NewLedger()
	l.Consume([]byte(`{"time":"2026-11-30T09:00:00.0Z","msg":"worker started"}
{"time":"2026-11-30T09:00:01.0Z","msg":"turn started","agent":"a5","turn":333,"ids":["m1","m2"]}
{"time":"2026-11-30T09:00:01.1Z","msg":"turn started","agent":"a6","turn":40,"ids":["m3"]}
{"time":"2026-11-30T09:00:01.2Z","msg":"turn started","agent":"a7","turn":12,"ids":["m4"]}
{"time":"2026-11-30T09:00:01.3Z","msg":"turn failed","agent":"a7","turn":12,"outcome":"unavailable"}
`), "r2")
	o := owed{"m1": {"a5"}, "m2": {"a5"}, "m3": {"a6"}, "m4": {"a7"}}
	if got := len(l.UnaccountedFor(o)); got != 4 {
		t.Fatalf("%d unaccounted before any later life; want 4", got)
	}
	l.Consume([]byte(`{"time":"2026-11-30T09:00:05.0Z","msg":"turn started","agent":"a5","turn":334,"ids":["m9"]}
{"time":"2026-11-30T09:00:05.0Z","msg":"turn started","agent":"a6","turn":40,"ids":["m3"]}
{"time":"2026-11-30T09:00:05.0Z","msg":"turn started","agent":"a7","turn":13,"ids":["m5"]}
`), "r3")
	un := l.UnaccountedFor(o)
	if len(un) != 2 || un[0] != (delivery{"a6", "m3"}) || un[1] != (delivery{"a7", "m4"}) {
		t.Fatalf("unaccounted %v; want m3 (its turn number reused: not recorded) and m4 (failed)", un)
	}
	if c := l.CountFor(o); c.Handled != 2 || c.Twice != 0 || c.Lost != 2 {
		t.Fatalf("count %+v; want m1, m2 handled once, m3 and m4 lost", c)
	}
	if got := l.RecordedUnlogged(o); len(got) != 2 || !strings.Contains(got[0], "turn 333 on r2") {
		t.Fatalf("recorded but unlogged: %q", got)
	}
	// Its line after all (read late): counted once, not twice.
	l.Consume([]byte(`{"time":"2026-11-30T09:00:01.5Z","msg":"turn completed","agent":"a5","turn":333,"ids":["m1","m2"]}
`), "r2")
	if c := l.CountFor(o); c.Handled != 2 || c.Twice != 0 {
		t.Fatalf("count after the late line %+v; want m1, m2 handled once", c)
	}
}
