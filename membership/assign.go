package membership

import (
	"hash/fnv"
	"path"
	"slices"
	"sort"
)

// Placement is where an assignment puts one agent.
type Placement struct {
	// Owner is the member that should hold the agent's lease.
	Owner string
	// Pinned: the agent has a replica_affinity.
	Pinned bool
	// Matched: Owner matches the agent's affinity (always true for an
	// agent that is not pinned). False for a pinned agent that no live
	// member matches: it falls back to the members at large.
	Matched bool
}

// Assign divides agents among members, the same way on every replica that
// is given the same agents, members and affinity (order does not matter).
//
// It is rendezvous (highest-random-weight) hashing with bounded loads:
// every (agent, member) pair has a weight, a hash of both names; pairs are
// taken from the heaviest down, each agent going to the first member that
// may take it and still has room: every member has room for
// floor(len(agents)/len(members)) agents, and the first members to fill
// it for one more until the remainder is placed, so loads differ by at
// most one when nothing is pinned.
// affinity maps an agent to a glob (path.Match) of the members that may
// own it; a pinned agent no live member matches may go to any member
// (Matched false), and pinned agents whose matching members are full
// overflow onto them rather than onto a member they do not match.
//
// Guarantees: deterministic; every agent gets exactly one member when
// members is not empty; an agent changes owner only when the members
// change; when a member joins, about len(agents)/len(members) agents move
// to it, most of them from the member they were on, and when one leaves,
// its agents spread over the others while nearly all the others' stay put.
// Not guaranteed: the strictly minimal number of moves (a bounded load can
// push a handful of agents to their second choice and back).
func Assign(agents, members []string, affinity map[string]string) map[string]Placement {
	out := make(map[string]Placement, len(agents))
	ms := sortedUnique(members)
	if len(ms) == 0 {
		return out
	}
	as := sortedUnique(agents)
	s := &assignment{
		out:      out,
		affinity: affinity,
		eligible: eligibleMembers(as, ms, affinity),
		load:     make(map[string]int, len(ms)),
		base:     len(as) / len(ms),
		extra:    len(as) % len(ms),
	}
	pairs := rankedPairs(as, ms, s.may)
	// Pinned agents first: they have fewer places to go.
	for _, pinnedPass := range []bool{true, false} {
		for _, p := range pairs {
			if _, done := out[p.a]; done || (s.eligible[p.a] != nil) != pinnedPass || s.full(p.m) {
				continue
			}
			s.place(p.a, p.m)
		}
	}
	s.placeLeft(as, ms)
	return out
}

// sortedUnique is a sorted copy of names without duplicates.
func sortedUnique(names []string) []string {
	out := slices.Clone(names)
	sort.Strings(out)
	return slices.Compact(out)
}

// eligibleMembers lists, for each agent of as with an affinity some
// member of ms matches, the members it may go to. An agent not in it may
// go to any member.
func eligibleMembers(as, ms []string, affinity map[string]string) map[string]map[string]bool {
	eligible := make(map[string]map[string]bool, len(as))
	for _, a := range as {
		pat := affinity[a]
		if pat == "" {
			continue
		}
		set := map[string]bool{}
		for _, m := range ms {
			if Matches(pat, m) {
				set[m] = true
			}
		}
		if len(set) > 0 {
			eligible[a] = set
		}
	}
	return eligible
}

// pair is an agent a, a member m it may go to, and their weight.
type pair struct {
	a, m string
	w    uint64
}

// rankedPairs is every (agent, member) pair for which may holds,
// heaviest first; ties go by agent, then member.
func rankedPairs(as, ms []string, may func(a, m string) bool) []pair {
	pairs := make([]pair, 0, len(as)*len(ms))
	for _, a := range as {
		for _, m := range ms {
			if may(a, m) {
				pairs = append(pairs, pair{a, m, weight(m, a)})
			}
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].w != pairs[j].w {
			return pairs[i].w > pairs[j].w
		}
		if pairs[i].a != pairs[j].a {
			return pairs[i].a < pairs[j].a
		}
		return pairs[i].m < pairs[j].m
	})
	return pairs
}

// assignment is an Assign under way: the placements so far and each
// member's load against its room.
type assignment struct {
	out      map[string]Placement
	affinity map[string]string
	// eligible[a] lists the members agent a may go to.
	eligible map[string]map[string]bool
	load     map[string]int
	// Room: every member takes base agents, and extra of them one more.
	base, extra int
}

func (s *assignment) may(a, m string) bool { return s.eligible[a] == nil || s.eligible[a][m] }

func (s *assignment) place(a, m string) {
	pinned := s.affinity[a] != ""
	s.out[a] = Placement{Owner: m, Pinned: pinned, Matched: !pinned || s.eligible[a] != nil}
	if s.load[m] == s.base {
		s.extra--
	}
	s.load[m]++
}

func (s *assignment) full(m string) bool {
	return s.load[m] > s.base || (s.load[m] == s.base && s.extra <= 0)
}

// placeLeft places whoever is left (pinned agents whose members are
// full, and agents those pushed out) on the least loaded member it may
// take, heaviest pair first among equals.
func (s *assignment) placeLeft(as, ms []string) {
	for _, a := range as {
		if _, done := s.out[a]; done {
			continue
		}
		best, bestLoad, bestW := "", 0, uint64(0)
		for _, m := range ms {
			if !s.may(a, m) {
				continue
			}
			w := weight(m, a)
			if best == "" || s.load[m] < bestLoad || (s.load[m] == bestLoad && w > bestW) {
				best, bestLoad, bestW = m, s.load[m], w
			}
		}
		s.place(a, best)
	}
}

// Matches reports whether member (a lease holder name) matches pattern, a
// holder name or a glob in path.Match syntax. A malformed pattern matches
// nothing (config validation refuses one).
func Matches(pattern, member string) bool {
	ok, err := path.Match(pattern, member)
	return ok && err == nil
}

// weight is the rendezvous weight of agent on member: FNV-1a of both
// names, finished with SplitMix64's mixer so that names differing in one
// character spread over the whole range.
func weight(member, agent string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(agent))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
