package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// ownerPollEvery is how often the harness asks again who owns each agent.
const ownerPollEvery = 250 * time.Millisecond

// owners maps each agent to the replica that owns it per the API ("" for
// none right now).
type owners map[string]string

// ownerAnswer is one replica's answer to who owns an agent, and when the
// question was sent.
type ownerAnswer struct {
	agent, owner string
	sent         time.Time
}

// awaitOwners asks the API who owns each of agents until settled holds
// for the answers, or timeout passes. Every ownerPollEvery it asks every
// agent's view again, of the running replicas of via in turn (each answers
// with the owner's view), without waiting for the answers still out: the
// view of an agent whose owner died fails only after the control timeout
// (2 s), and waiting for it would blur the moment the agent moved. For
// each agent the answer to the latest question answered counts. It
// returns the owners and when the last of the questions whose answers
// settled them was sent: ownership settled at most ownerPollEvery (plus a
// round trip) before that.
func (e *env) awaitOwners(via []*service, agents []string, timeout time.Duration, what string, settled func(owners) bool) (owners, time.Time, error) {
	var ask []*service
	for _, s := range via {
		if s.running() {
			ask = append(ask, s)
		}
	}
	if len(ask) == 0 {
		return nil, time.Time{}, fmt.Errorf("waiting for %s: no replica running to ask", what)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel() // before wg.Wait: ends the questions still out
	answers := make(chan ownerAnswer)
	round := 0
	askAll := func() {
		sent := time.Now()
		for i, a := range agents {
			s := ask[(round+i)%len(ask)]
			wg.Go(func() {
				st, err := s.status(ctx, a)
				if err != nil {
					st.Owner = ""
				}
				select {
				case answers <- ownerAnswer{agent: a, owner: st.Owner, sent: sent}:
				case <-ctx.Done():
				}
			})
		}
		round++
	}

	now, latest := owners{}, map[string]time.Time{}
	tick := time.NewTicker(ownerPollEvery)
	defer tick.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	askAll()
	for {
		select {
		case a := <-answers:
			if a.sent.Before(latest[a.agent]) {
				continue // a newer question was answered already
			}
			latest[a.agent], now[a.agent] = a.sent, a.owner
			if len(now) == len(agents) && settled(now) {
				var at time.Time
				for _, t := range latest {
					at = later(at, t)
				}
				return maps.Clone(now), at, nil
			}
		case <-tick.C:
			askAll()
		case <-deadline.C:
			return maps.Clone(now), time.Time{}, fmt.Errorf("timed out after %v waiting for %s (owners then: %s)", timeout, what, now.describe(agents))
		case <-ctx.Done():
			return maps.Clone(now), time.Time{}, fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		}
	}
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// count returns how many agents each of holders owns.
func (o owners) count(holders []string) map[string]int {
	n := make(map[string]int, len(holders))
	for _, h := range holders {
		n[h] = 0
	}
	for _, h := range o {
		if _, ok := n[h]; ok {
			n[h]++
		}
	}
	return n
}

// of returns the agents holder owns, sorted.
func (o owners) of(holder string) []string {
	var out []string
	for a, h := range o {
		if h == holder {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// ownedBy reports whether every agent is owned by one of holders.
func (o owners) ownedBy(holders []string) bool {
	for _, h := range o {
		if !slices.Contains(holders, h) {
			return false
		}
	}
	return true
}

// spreadOver returns the condition that every agent is owned by one of
// holders and each of them owns between lo and hi agents.
func spreadOver(holders []string, lo, hi int) func(owners) bool {
	return func(o owners) bool {
		if !o.ownedBy(holders) {
			return false
		}
		for _, n := range o.count(holders) {
			if n < lo || n > hi {
				return false
			}
		}
		return true
	}
}

// spread renders how many agents each of holders owns: "r1 4, r2 4, r3 4".
func (o owners) spread(holders []string) string {
	n := o.count(holders)
	parts := make([]string, len(holders))
	for i, h := range holders {
		parts[i] = fmt.Sprintf("%s %d", h, n[h])
	}
	return strings.Join(parts, ", ")
}

// describe renders each agent's owner: "a01 r1, a02 none, ...".
func (o owners) describe(agents []string) string {
	parts := make([]string, len(agents))
	for i, a := range agents {
		h, ok := o[a]
		switch {
		case !ok:
			h = "not answered"
		case h == "":
			h = "none"
		}
		parts[i] = a + " " + h
	}
	return strings.Join(parts, ", ")
}

// busiest returns the one of holders owning most agents (the first of
// them on a tie).
func (o owners) busiest(holders []string) string {
	n := o.count(holders)
	best := holders[0]
	for _, h := range holders[1:] {
		if n[h] > n[best] {
			best = h
		}
	}
	return best
}

// checkMetrics compares o, the owners per the API, with what each of
// reps (all running) says on /metrics: agent_worker_agent_owned is 1 on
// an agent's owner and 0 on the others, and agent_worker_replicas counts
// all of reps. It returns the disagreements, none when they agree.
func (e *env) checkMetrics(reps []*service, o owners, agents []string) ([]string, error) {
	var diffs []string
	for _, s := range reps {
		m, err := s.metrics(e.ctx)
		if err != nil {
			return nil, err
		}
		if n, ok := m["agent_worker_replicas"]; !ok || int(n) != len(reps) {
			diffs = append(diffs, fmt.Sprintf("%s: agent_worker_replicas %v (present: %t), want %d", s.name, n, ok, len(reps)))
		}
		for _, a := range agents {
			want := 0.0
			if o[a] == s.name {
				want = 1
			}
			if got, ok := m[`agent_worker_agent_owned{agent="`+a+`"}`]; !ok || got != want {
				diffs = append(diffs, fmt.Sprintf("%s: agent_worker_agent_owned{agent=%q} %v (present: %t), want %v (owner per the API: %s)", s.name, a, got, ok, want, o[a]))
			}
		}
	}
	return diffs, nil
}
