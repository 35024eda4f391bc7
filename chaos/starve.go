package main

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The starve scenario's size and squeeze.
const (
	starveAgents = 10_000
	// starveShare is the share of one core the worker gets: its cgroup's
	// CFS quota (25 ms of every 100 ms).
	starveShare = 0.25
	// starveReady bounds its start: on a quiet machine 10,000 agents are
	// ready in 4–8 s at a full core.
	starveReady = 4 * time.Minute
	// starveDrain bounds the burst's handling.
	starveDrain = 4 * time.Minute
	// starvePublishers publish the burst at once.
	starvePublishers = 64
)

// starveScript answers at once: the squeeze, not the model, is the load.
const starveScript = `
      - text: "handled"
        usage: {input: 100, output: 10}`

// starve: one worker (embedded NATS, state in its KV) with 10,000 agents,
// held from its first instruction to a quarter of a core by a cgroup CPU
// quota, the lease ttl at its default (15 s); once ready, a burst of
// 10,000 messages, one per agent. A replica starved on a busy node must
// become ready, handle every message once and let its agents go at most
// once: renewals of its lease record never wait behind the bulk of its
// work (restores, the burst), and a let-go costs no restores nobody needed.
func starve(e *env) error {
	agents := numbered("s", starveAgents)
	e.story("One worker (embedded NATS, JetStream KV store, lease ttl 15 s: its default) with %d agents ran in a cgroup whose CPU quota held it to %.2f of a core (the CFS quota, %d µs of every %d), from its first instruction: a replica starved on a busy node.", starveAgents, starveShare, int(starveShare*cpuPeriod), cpuPeriod)
	e.story("Once its API answered /readyz (within %s, else the scenario fails), %d messages were posted at once through its API (POST /v1/agents/{name}/messages with an id), one per agent, by %d clients.", human(starveReady), starveAgents, starvePublishers)
	e.story("It must handle each once (within %s) and let its agents go at most once (a let-go throws away nothing nobody needed: agents nobody took are kept), and its lease renewals must go on however busy the rest of it is; their p99 from its metrics is noted.", human(starveDrain))
	e.story("Recovery: from ready to the first completed turn.")
	q, err := newCPUQuota(fmt.Sprintf("agent-worker-chaos-%d", os.Getpid()), starveShare)
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	w, err := e.worker("r1", workerConf{natsListen: addr, agents: agents, script: starveScript, unthrottled: true, ttl: 15 * time.Second})
	if err != nil {
		return err
	}
	w.argv, w.readyWithin = q.wrap(w.argv), starveReady
	defer func() {
		_ = w.stop(15 * time.Second)
		_ = q.remove()
	}()
	began := time.Now()
	if err := e.start(w); err != nil {
		return err
	}
	ready := time.Now()
	e.note("ready %s after its start, at %.2f of a core", secs(ready.Sub(began)), starveShare)
	e.cleared(ready, agents, "")
	if err := e.connect("nats://" + addr); err != nil {
		return err
	}
	if err := e.burst(w, agents); err != nil {
		return err
	}
	e.note("the burst of %d was accepted %s after ready", starveAgents, secs(time.Since(ready)))
	if err := e.drain(starveDrain, agents); err != nil {
		return err
	}
	if t := q.throttled(); t != "" {
		e.note("the kernel held it back: %s", t)
	}
	if p, n, err := renewP99(e, w); err != nil {
		e.note("lease renewals not read from its metrics: %v", err)
	} else {
		e.note("lease renewals: %d, p99 %s", n, p)
	}
	letGos := e.led.LetGos()
	for _, l := range letGos {
		e.note("it let every agent go at %s (%s, %d agents)", l.Time.Format("15:04:05.000"), l.Why, l.Agents)
	}
	for _, l := range e.led.TakenBack() {
		e.note("it took back %d of the %d it let go, unchanged (nobody had taken them)", l.Agents, l.Of)
	}
	if len(letGos) > 1 {
		e.broken("it let every agent go %d times, want at most once", len(letGos))
	}
	return nil
}

// burst posts one message to each agent through w's API,
// starvePublishers at once.
func (e *env) burst(w *service, agents []string) error {
	next := make(chan string)
	errs := make(chan error, starvePublishers)
	var wg sync.WaitGroup
	for range starvePublishers {
		wg.Go(func() {
			for a := range next {
				if _, err := e.pub.post(e.ctx, w.api, a); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for _, a := range agents {
		select {
		case next <- a:
		case err := <-errs:
			close(next)
			wg.Wait()
			return err
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// renewP99 reads the worker's lease renewals from its metrics: their
// p99 (the upper bound of the bucket it falls in) and their count.
func renewP99(e *env, w *service) (string, int, error) {
	m, err := w.metrics(e.ctx)
	if err != nil {
		return "", 0, err
	}
	type bucket struct {
		le float64
		n  float64
	}
	var bs []bucket
	for k, v := range m {
		if !strings.HasPrefix(k, `agent_worker_lease_renew_seconds_bucket{`) || !strings.Contains(k, `outcome="ok"`) {
			continue
		}
		i := strings.Index(k, `le="`)
		if i < 0 {
			continue
		}
		s := k[i+4:]
		s = s[:strings.IndexByte(s, '"')]
		le := math.Inf(1)
		if s != "+Inf" {
			if le, err = strconv.ParseFloat(s, 64); err != nil {
				continue
			}
		}
		bs = append(bs, bucket{le, v})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	if len(bs) == 0 || bs[len(bs)-1].n == 0 {
		return "", 0, fmt.Errorf("no lease renewals in the metrics")
	}
	total := bs[len(bs)-1].n
	for _, b := range bs {
		if b.n >= 0.99*total {
			if math.IsInf(b.le, 1) {
				return "over 10 s", int(total), nil
			}
			return fmt.Sprintf("≤ %g s", b.le), int(total), nil
		}
	}
	return "", int(total), nil
}
