package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agent-worker/agent-worker/internal/textclip"
)

// delivery is one message for one agent: the unit the soak accounts,
// since a message on a subject two agents bind is owed to each of them
// once (message ids are per agent).
type delivery struct{ agent, id string }

func (d delivery) String() string { return d.id + " to " + d.agent }

// owed maps each id JetStream acknowledged to the agents it is for: one
// for an agent's own subjects, every binding agent for a shared one.
type owed map[string][]string

// deliveries returns every delivery of o, sorted by id, then agent.
func (o owed) deliveries() []delivery {
	var out []delivery
	for id, agents := range o {
		for _, a := range agents {
			out = append(out, delivery{a, id})
		}
	}
	slices.SortFunc(out, func(a, b delivery) int {
		if c := strings.Compare(a.id, b.id); c != 0 {
			return c
		}
		return strings.Compare(a.agent, b.agent)
	})
	return out
}

// CountFor tallies the deliveries of o as Count tallies ids: handled when
// a completed turn of its agent names its id (a turn of another agent
// does not count), dead when that agent dead-lettered it. Published is
// the number of deliveries; Unknown counts the (agent, id) pairs handled
// that o does not owe: an id handled by an agent it was not for, or one
// never acked.
func (l *Ledger) CountFor(o owed) Count {
	c := Count{Reasons: map[string]int{}}
	for id, agents := range o {
		for _, a := range agents {
			d := delivery{a, id}
			reason, dead := l.deadFor[d]
			_, dropped := l.droppedFor[d]
			c.add(l.handledByCount(d), reason, dead, dropped)
		}
	}
	for d := range l.handledBy {
		if !slices.Contains(o[d.id], d.agent) {
			c.Unknown++
		}
	}
	return c
}

// handledByCount is handledBy[d], or 1 when no completed turn named d but
// a recorded turn whose process died before its line handled it.
func (l *Ledger) handledByCount(d delivery) int {
	if n := l.handledBy[d]; n > 0 {
		return n
	}
	if _, ok := l.recordedUnlogged(d.agent, d.id); ok {
		return 1
	}
	return 0
}

// UnaccountedFor returns the deliveries of o neither handled nor
// dead-lettered, sorted.
func (l *Ledger) UnaccountedFor(o owed) []delivery {
	var out []delivery
	for _, d := range o.deliveries() {
		if _, dead := l.deadFor[d]; l.handledByCount(d) == 0 && !dead {
			out = append(out, d)
		}
	}
	return out
}

// Doubled describes each delivery of o handled by two or more completed
// turns, with those turns: `s-m0042 to a03: turn 17 on r1 at
// 12:00:01.250, turn 18 on r2 at 12:00:05.100`, sorted.
func (l *Ledger) Doubled(o owed) []string {
	twice := map[delivery][]string{}
	for d, n := range l.handledBy {
		if n > 1 && slices.Contains(o[d.id], d.agent) {
			twice[d] = nil
		}
	}
	if len(twice) == 0 {
		return nil
	}
	for _, c := range l.completions {
		for _, id := range c.IDs {
			d := delivery{c.Agent, id}
			if turns, ok := twice[d]; ok {
				twice[d] = append(turns, c.String())
			}
		}
	}
	var out []string
	for d, turns := range twice {
		out = append(out, d.String()+": "+strings.Join(turns, ", "))
	}
	slices.Sort(out)
	return out
}

// String names a completed turn: "turn 17 on r1 at 12:00:01.250".
func (c Completion) String() string {
	return fmt.Sprintf("turn %d on %s at %s", c.Turn, c.Source, c.Time.Format("15:04:05.000"))
}

// LostWhy says what the logs tell of a delivery no completed turn named:
// that its agent acked it as handled by a recorded turn (and how that
// turn ended per the logs), or dropped it; "" when they tell nothing.
func (l *Ledger) LostWhy(d delivery) string {
	if n, ok := l.ackedAs[d]; ok {
		why := fmt.Sprintf("acked as handled by recorded turn %d", n)
		for _, f := range l.failures {
			if f.Agent == d.agent && f.Turn == n {
				return why + fmt.Sprintf(", which %s logged as failed at %s (%s: %s)", f.Source, f.Time.Format("15:04:05.000"), f.Outcome, textclip.Bytes(f.Error, 200, "…"))
			}
		}
		return why + ", which no other log line names"
	}
	if why, ok := l.droppedFor[d]; ok {
		return "dropped: " + why
	}
	return ""
}

// ReusedTurns describes each turn number of an agent that two or more
// completed turns logged, those in the order of their times, the numbers
// sorted: `a01 turn 379: turn 379 on r1 at 12:00:01.250, turn 379 on r3
// at 12:00:40.100`. Turn numbers count an agent's turns across its
// owners; a number used twice means an owner went on from a stale count.
func (l *Ledger) ReusedTurns() []string {
	type key struct {
		agent string
		turn  uint64
	}
	by := map[key][]Completion{}
	for _, c := range l.completions {
		k := key{c.Agent, c.Turn}
		by[k] = append(by[k], c)
	}
	var out []string
	for k, cs := range by {
		if len(cs) < 2 {
			continue
		}
		slices.SortFunc(cs, func(a, b Completion) int { return a.Time.Compare(b.Time) })
		turns := make([]string, len(cs))
		for i, c := range cs {
			turns[i] = c.String()
		}
		out = append(out, fmt.Sprintf("%s turn %d: %s", k.agent, k.turn, strings.Join(turns, ", ")))
	}
	slices.Sort(out)
	return out
}

// Abandoned counts the unfinished turns given up because their messages
// did not come again, and how many of them a completed-turn line of the
// same agent and number had ended before.
func (l *Ledger) Abandoned() (n, completed int) {
	for _, a := range l.abandoned {
		n++
		for _, c := range l.completions {
			if c.Agent == a.Agent && c.Turn == a.Turn && c.Time.Before(a.Time) {
				completed++
				break
			}
		}
	}
	return n, completed
}
