package membership

import (
	"fmt"
	"maps"
	"testing"
)

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return out
}

func loads(p map[string]Placement) map[string]int {
	out := map[string]int{}
	for _, x := range p {
		out[x.Owner]++
	}
	return out
}

func moved(a, b map[string]Placement) int {
	n := 0
	for k := range a {
		if a[k].Owner != b[k].Owner {
			n++
		}
	}
	return n
}

func TestAssignIsEvenAndDeterministic(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ agents, members int }{{30, 1}, {30, 2}, {30, 3}, {31, 3}, {100, 7}, {5, 8}} {
		agents, members := names("agent-", c.agents), names("replica-", c.members)
		p := Assign(agents, members, nil)
		if len(p) != c.agents {
			t.Fatalf("%v: %d placed", c, len(p))
		}
		base := c.agents / c.members
		ls := loads(p)
		for m, n := range ls {
			if n != base && n != base+1 {
				t.Errorf("%v: %s has %d agents, want %d or %d", c, m, n, base, base+1)
			}
		}
		if c.agents >= c.members && len(ls) != c.members {
			t.Errorf("%v: only %d members got agents", c, len(ls))
		}
		rev := append([]string(nil), members...)
		for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
			rev[i], rev[j] = rev[j], rev[i]
		}
		if q := Assign(agents, rev, nil); !maps.Equal(p, q) {
			t.Errorf("%v: the order of members changed the assignment", c)
		}
	}
}

// A join moves about a third of the agents (to the newcomer); a leave
// moves the leaver's agents and almost nothing else.
func TestAssignIsStable(t *testing.T) {
	t.Parallel()
	agents := names("agent-", 300)
	three := Assign(agents, []string{"r1", "r2", "r3"}, nil)
	two := Assign(agents, []string{"r1", "r2"}, nil)
	if n := moved(two, three); n > 300/3+15 {
		t.Errorf("a join moved %d agents, want about 100", n)
	}
	t.Logf("300 agents, 2 → 3 members: %d moved (ideal 100)", moved(two, three))
	churn := 0
	for a, p := range three {
		if p.Owner != "r3" && two[a].Owner != p.Owner {
			churn++
		}
	}
	t.Logf("3 → 2 members: %d moved between the survivors", churn)
	if churn > 15 {
		t.Errorf("a leave moved %d agents between the survivors", churn)
	}
	for a, p := range two {
		if three[a].Owner == "r3" && p.Owner == "r3" {
			t.Fatalf("agent %s on a member that left", a)
		}
	}
}

func TestAssignHonoursAffinity(t *testing.T) {
	t.Parallel()
	agents := names("agent-", 30)
	aff := map[string]string{"agent-00": "eu-*", "agent-01": "us-1", "agent-02": "nowhere"}
	p := Assign(agents, []string{"eu-1", "eu-2", "us-1"}, aff)
	if o := p["agent-00"]; !o.Pinned || !o.Matched || (o.Owner != "eu-1" && o.Owner != "eu-2") {
		t.Errorf("agent-00: %+v, want on eu-1 or eu-2", o)
	}
	if o := p["agent-01"]; o.Owner != "us-1" || !o.Matched {
		t.Errorf("agent-01: %+v, want on us-1", o)
	}
	if o := p["agent-02"]; !o.Pinned || o.Matched || o.Owner == "" {
		t.Errorf("agent-02: %+v, want placed anywhere, unmatched", o)
	}
	if o := p["agent-05"]; o.Pinned || !o.Matched {
		t.Errorf("agent-05: %+v, want unpinned", o)
	}
	// Pinned agents beyond their replicas' room still go to them.
	many := map[string]string{}
	for _, a := range agents[:20] {
		many[a] = "us-1"
	}
	p = Assign(agents, []string{"eu-1", "eu-2", "us-1"}, many)
	for _, a := range agents[:20] {
		if p[a].Owner != "us-1" {
			t.Fatalf("%s pinned to us-1 is on %s", a, p[a].Owner)
		}
	}
	if l := loads(p); l["eu-1"]+l["eu-2"] != 10 {
		t.Errorf("loads %v", l)
	}
}

func TestAssignWithoutMembers(t *testing.T) {
	t.Parallel()
	if p := Assign([]string{"a"}, nil, nil); len(p) != 0 {
		t.Fatalf("%v", p)
	}
}
