package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agent-worker/agent-worker/metrics"
)

// replicaSource is a source that also reports the live replicas.
type replicaSource struct {
	source
	n int
}

func (s *replicaSource) Replicas() int { return s.n }

// A standby replica reports agent_owned 0 for the agents another replica
// owns, and none of their other gauges; the owner reports them all and
// agent_owned 1. Summed over replicas, each agent counts once.
func TestPerAgentGaugesComeFromTheOwnerOnly(t *testing.T) {
	t.Parallel()
	next := t0.Add(time.Hour)
	owner, standby := &replicaSource{n: 2}, &replicaSource{n: 2}
	mo, ms := metrics.New(testAgents(), owner), metrics.New(testAgents(), standby)
	owner.set(
		metrics.AgentGauges{Name: "oncall", State: "running", InboxPending: 2, SubagentsRunning: 1, NextSchedule: map[string]time.Time{"morning": next}},
		metrics.AgentGauges{Name: "demo", Standby: true, State: "sleeping", InboxPending: 7},
	)
	standby.set(
		metrics.AgentGauges{Name: "oncall", Standby: true, State: "sleeping", InboxPending: 9, NextSchedule: map[string]time.Time{"morning": next}},
		metrics.AgentGauges{Name: "demo", State: "paused"},
	)
	o, s := series(t, mo.Registry()), series(t, ms.Registry())
	expect(t, o, map[string]float64{
		`agent_worker_agent_owned{agent="oncall"}`:                 1,
		`agent_worker_agent_owned{agent="demo"}`:                   0,
		`agent_worker_agent_state{agent="oncall",state="running"}`: 1,
		`agent_worker_inbox_pending{agent="oncall"}`:               2,
		`agent_worker_replicas{}`:                                  2,
	})
	expect(t, s, map[string]float64{
		`agent_worker_agent_owned{agent="oncall"}`:              0,
		`agent_worker_agent_owned{agent="demo"}`:                1,
		`agent_worker_agent_state{agent="demo",state="paused"}`: 1,
		`agent_worker_inbox_pending{agent="demo"}`:              0,
		`agent_worker_replicas{}`:                               2,
	})
	for name, fam := range map[string]map[string]float64{"owner": o, "standby": s} {
		for _, f := range []string{"agent_worker_agent_state", "agent_worker_inbox_pending", "agent_worker_subagents_running", "agent_worker_schedule_next_run_timestamp_seconds"} {
			for k := range family(fam, f) {
				if (name == "owner" && strings.Contains(k, `agent="demo"`)) || (name == "standby" && strings.Contains(k, `agent="oncall"`)) {
					t.Errorf("%s replica reports %s for an agent it does not own", name, k)
				}
			}
		}
	}
	// Summed over the two replicas: one state and one owner per agent.
	var states, owned float64
	for _, fam := range []map[string]float64{o, s} {
		for _, v := range family(fam, "agent_worker_agent_state") {
			states += v
		}
		for _, v := range family(fam, "agent_worker_agent_owned") {
			owned += v
		}
	}
	if states != 2 || owned != 2 {
		t.Errorf("summed over replicas: agent_state %v, agent_owned %v; want 2 and 2", states, owned)
	}
}

func TestASourceWithoutReplicasHasNoReplicaSeries(t *testing.T) {
	t.Parallel()
	m := metrics.New(testAgents(), &source{})
	if n, err := testutil.GatherAndCount(m.Registry(), "agent_worker_replicas"); err != nil || n != 0 {
		t.Fatalf("agent_worker_replicas: %d series (%v), want none", n, err)
	}
}

func TestOwnershipChangesAreCountedByReason(t *testing.T) {
	t.Parallel()
	m := metrics.New(testAgents(), nil)
	got := series(t, m.Registry())
	if n := len(family(got, "agent_worker_ownership_changes_total")); n != 2*4 {
		t.Fatalf("%d ownership series before any change, want 4 reasons per agent", n)
	}
	m.OwnershipChange("oncall", "acquired")
	m.OwnershipChange("oncall", "handed_over")
	m.OwnershipChange("oncall", "handed_over")
	m.OwnershipChange("demo", "lost")
	m.OwnershipChange("demo", "stolen") // not a reason: not counted
	m.OwnershipChange("ghost", "acquired")
	got = series(t, m.Registry())
	expect(t, got, map[string]float64{
		`agent_worker_ownership_changes_total{agent="oncall",reason="acquired"}`:    1,
		`agent_worker_ownership_changes_total{agent="oncall",reason="handed_over"}`: 2,
		`agent_worker_ownership_changes_total{agent="oncall",reason="released"}`:    0,
		`agent_worker_ownership_changes_total{agent="demo",reason="lost"}`:          1,
		`agent_worker_events_dropped_total{reason="unconfigured"}`:                  1,
	})
	if n := len(family(got, "agent_worker_ownership_changes_total")); n != 8 {
		t.Errorf("%d ownership series, want 8: %v", n, family(got, "agent_worker_ownership_changes_total"))
	}
}
