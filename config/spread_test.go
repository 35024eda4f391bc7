package config

import (
	"testing"
	"time"
)

func TestLeaseHeartbeatAndReplicaAffinity(t *testing.T) {
	t.Parallel()
	c, errs := loadText(t, `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - {name: a, model: fake, replica_affinity: "eu-*"}
`)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if c.Lease.Heartbeat.D() != time.Second || c.Agents[0].ReplicaAffinity != "eu-*" {
		t.Fatalf("heartbeat %v, affinity %q", c.Lease.Heartbeat.D(), c.Agents[0].ReplicaAffinity)
	}
	tests := []struct{ name, yaml, want string }{
		{"heartbeat above a third of the ttl", `
lease: {ttl: 3s, heartbeat: 2s}
models:
  fake: {provider: scripted, behaviour: demo}
agents: [{name: a, model: fake}]
`, "config.yaml:1: lease.heartbeat: must be at most a third of lease.ttl (3s), so a dead replica is noticed before its leases expire; got 2s"},
		{"heartbeat too short", `
lease: {heartbeat: 10ms}
models:
  fake: {provider: scripted, behaviour: demo}
agents: [{name: a, model: fake}]
`, "config.yaml:1: lease.heartbeat: must be at least 50ms; got 10ms"},
		{"bad affinity glob", `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - {name: a, model: fake, replica_affinity: "eu-["}
`, `config.yaml:4: agents[0].replica_affinity: bad glob "eu-[": syntax error in pattern`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, got := loadText(t, tt.yaml)
			assertErrors(t, got, []string{tt.want})
		})
	}
}
