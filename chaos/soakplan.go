package main

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The soak's faults, by the name its report gives them.
const (
	faultKill     = "kill -9 replica"
	faultTerm     = "SIGTERM replica"
	faultNATS     = "kill -9 nats-server"
	faultRedis    = "redis down"
	faultProvider = "provider errors"
	faultPause    = "pause agent"
	faultBurst    = "burst"
	// Timing faults: a replica frozen (a stop-the-world pause, a VM
	// freeze) or starved (a busy node, a CPU limit).
	faultStop   = "SIGSTOP replica"
	faultStarve = "CPU quota replica"
)

// The ranges the picker draws from, inclusive.
var (
	spanGap          = [2]time.Duration{20 * time.Second, 40 * time.Second} // calm between faults
	spanReplicaDown  = [2]time.Duration{1 * time.Second, 5 * time.Second}   // kill -9, SIGTERM
	spanNATSDown     = [2]time.Duration{1 * time.Second, 3 * time.Second}
	spanRedisDown    = [2]time.Duration{5 * time.Second, 15 * time.Second}
	spanProviderDown = [2]time.Duration{10 * time.Second, 30 * time.Second}
	spanPaused       = [2]time.Duration{5 * time.Second, 15 * time.Second}
	spanStopped      = [2]time.Duration{10 * time.Second, 30 * time.Second}
	spanStarved      = [2]time.Duration{30 * time.Second, 60 * time.Second}
)

// starvedShare is the share of one core a starved replica gets: 3 ms of
// every 100. Its four agents' load wants about a tenth of a core; at a
// quarter (the starve scenario's share, for 10,000 agents) the quota
// never bit.
const starvedShare = 0.03

// burstMessages is the size of a burst: published back to back to one
// agent's inbox, beside the steady load.
const burstMessages = 500

// fault is one fault of the soak as picked: what, on what, for how long.
type fault struct {
	// Gap is the calm before it: from the moment the previous fault was
	// cleared (or the load began) to this one.
	Gap  time.Duration
	Kind string
	// Replica is the lease holder a kill or SIGTERM hits; Agent the agent
	// paused or sent the burst.
	Replica, Agent string
	// For is how long the replica, nats-server or redis-server stays
	// down, the provider refuses, or the agent stays paused.
	For time.Duration
	// Status is what the provider refuses with: 429 or 500.
	Status int
}

// String says what the fault does in a few words.
func (f fault) String() string {
	switch f.Kind {
	case faultKill, faultTerm:
		return fmt.Sprintf("%s %s, restarted after %s", f.Kind, f.Replica, secs(f.For))
	case faultStop:
		return fmt.Sprintf("%s %s for %s, then SIGCONT", f.Kind, f.Replica, secs(f.For))
	case faultStarve:
		return fmt.Sprintf("%s %s: %.2f of a core for %s", f.Kind, f.Replica, starvedShare, secs(f.For))
	case faultNATS, faultRedis:
		return fmt.Sprintf("%s for %s", f.Kind, secs(f.For))
	case faultProvider:
		return fmt.Sprintf("provider answers %d for %s", f.Status, secs(f.For))
	case faultPause:
		return fmt.Sprintf("pause %s for %s", f.Agent, secs(f.For))
	case faultBurst:
		return fmt.Sprintf("burst of %d to %s", burstMessages, f.Agent)
	}
	return f.Kind
}

// faultPicker draws the soak's faults from a seeded generator: the same
// seed, store and names give the same faults in the same order, so a run
// can be repeated (its timing, and so what each fault meets, cannot).
type faultPicker struct {
	rng              *rand.Rand
	kinds            []string
	replicas, agents []string
}

// newFaultPicker returns the picker for seed. Redis outages are picked
// only with the redis store.
func newFaultPicker(seed uint64, store string, replicas, agents []string) *faultPicker {
	kinds := []string{faultKill, faultTerm, faultNATS, faultProvider, faultPause, faultBurst, faultStop, faultStarve}
	if store == storeRedis {
		kinds = append(kinds, faultRedis)
	}
	return &faultPicker{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), kinds: kinds, replicas: replicas, agents: agents}
}

// next picks the next fault, every kind as likely as the others.
func (p *faultPicker) next() fault {
	f := fault{Gap: p.between(spanGap), Kind: p.kinds[p.rng.IntN(len(p.kinds))]}
	switch f.Kind {
	case faultKill, faultTerm:
		f.Replica, f.For = p.replicas[p.rng.IntN(len(p.replicas))], p.between(spanReplicaDown)
	case faultStop:
		f.Replica, f.For = p.replicas[p.rng.IntN(len(p.replicas))], p.between(spanStopped)
	case faultStarve:
		f.Replica, f.For = p.replicas[p.rng.IntN(len(p.replicas))], p.between(spanStarved)
	case faultNATS:
		f.For = p.between(spanNATSDown)
	case faultRedis:
		f.For = p.between(spanRedisDown)
	case faultProvider:
		f.For, f.Status = p.between(spanProviderDown), http.StatusTooManyRequests
		if p.rng.IntN(2) == 1 {
			f.Status = http.StatusInternalServerError
		}
	case faultPause:
		f.Agent, f.For = p.agents[p.rng.IntN(len(p.agents))], p.between(spanPaused)
	case faultBurst:
		f.Agent = p.agents[p.rng.IntN(len(p.agents))]
	}
	return f
}

// between draws a duration in r, to the millisecond.
func (p *faultPicker) between(r [2]time.Duration) time.Duration {
	span := int64((r[1] - r[0]) / time.Millisecond)
	return r[0] + time.Duration(p.rng.Int64N(span+1))*time.Millisecond
}

// The soak's state stores (SOAK_STORE).
const (
	storeRedis = "redis"
	storeKV    = "kv"
)

// soakSettings is what the environment chooses of a soak.
type soakSettings struct {
	Seed     uint64
	Duration time.Duration // of the load and its faults; the drain comes after
	Store    string        // storeRedis or storeKV
}

// soakSettingsFrom reads SOAK_SEED (an unsigned integer; unset or empty:
// now's nanoseconds), SOAK_DURATION (a Go duration; default 10m) and
// SOAK_STORE (redis, the default, or kv) through getenv.
func soakSettingsFrom(getenv func(string) string, now time.Time) (soakSettings, error) {
	s := soakSettings{Seed: uint64(now.UnixNano()), Duration: 10 * time.Minute, Store: storeRedis}
	if v := strings.TrimSpace(getenv("SOAK_SEED")); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return s, fmt.Errorf("SOAK_SEED=%q: want an unsigned integer: %w", v, err)
		}
		s.Seed = seed
	}
	if v := strings.TrimSpace(getenv("SOAK_DURATION")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return s, fmt.Errorf("SOAK_DURATION=%q: want a positive Go duration such as 10m", v)
		}
		s.Duration = d
	}
	switch v := strings.TrimSpace(getenv("SOAK_STORE")); v {
	case "", storeRedis:
	case storeKV:
		s.Store = storeKV
	default:
		return s, fmt.Errorf("SOAK_STORE=%q: want redis or kv", v)
	}
	return s, nil
}
