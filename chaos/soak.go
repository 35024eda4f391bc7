package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"
)

// The soak's world: three replicas sharing an external nats-server and a
// store, twelve agents on a fake provider, two of which bind one shared
// subject.
const (
	soakReplicas  = 3
	soakAgents    = 12
	sharedSubject = "soak.shared.>"    // bound, mode inbox, by the last two agents
	sharedPublish = "soak.shared.load" // where the load publishes on it
	soakInterval  = 50 * time.Millisecond
	// soakDrain bounds the wait for the last deliveries once the load
	// and the faults are over; keepAliveEvery paces the inbox messages
	// sent meanwhile to agents still owed one, so that deferred messages
	// have a turn to ride along with.
	soakDrain      = 3 * time.Minute
	keepAliveEvery = 10 * time.Second
	// soakSecondDelay is how long the provider takes to answer a turn's
	// second model call: every turn lasts at least this.
	soakSecondDelay = 250 * time.Millisecond
	// The priced model, in USD per million tokens.
	soakModel         = "gpt-soak"
	priceIn, priceOut = 2.0, 8.0
	// soakTurn coalesces a second of wakes into one turn and lifts the
	// turn rate limits, so that the soak measures delivery under faults,
	// not the throttle.
	soakTurn = "    turn: {max_per_wake: 1000, coalesce: 1s}\n    limits: {turns_per_hour: 1000000, turn_burst: 1000}\n"
)

// soak is one soak run: the scenario environment it shares with the
// chaos scenarios, and what only it keeps.
type soak struct {
	*env
	set    soakSettings
	agents []string
	shared []string // the agents binding sharedSubject
	reps   []*replica
	ns, rs *service // rs: nil with the kv store
	prov   *provider
	watch  *watch
	began  time.Time // the load's start
	fired  []firedFault
	paused map[string]bool // agents a pause fault may have left paused

	mu    sync.Mutex
	owe   owed           // every acked id and the agents it is for
	kinds map[string]int // acked messages by their id's kind letter
}

// runSoak runs the soak in a directory under h.root and accounts for
// every delivery, whatever happened; every process it started is stopped
// before it returns.
func runSoak(ctx context.Context, h *harness, set soakSettings) *soakResult {
	res := &Result{Name: "soak", Title: "soak on " + set.Store, Pending: -1}
	e := &env{ctx: ctx, h: h, prefix: "soak", res: res, led: NewLedger()}
	e.tail = NewTail(e.led)
	s := &soak{env: e, set: set, agents: numbered("a", soakAgents), paused: map[string]bool{}, owe: owed{}, kinds: map[string]int{}}
	s.shared = s.agents[len(s.agents)-2:]
	out := &soakResult{Settings: set, CPUs: runtime.NumCPU(), Began: time.Now()}
	err := s.run(out)
	res.Err = errors.Join(err, e.finish())
	if s.prov != nil {
		s.prov.close()
		out.Spend.First, out.Spend.Second, out.Spend.Refused = s.prov.Answered()
	}
	out.Elapsed = time.Since(out.Began)
	s.fill(out)
	return out
}

// run sets the world up, loads it under faults for the soak's duration,
// drains it and takes the last samples.
func (s *soak) run(out *soakResult) error {
	dir, err := os.MkdirTemp(s.h.root, "soak-"+s.set.Store+"-")
	if err != nil {
		return err
	}
	s.dir = dir
	if err := s.setUp(); err != nil {
		return err
	}
	watchCtx, stopWatch := context.WithCancel(s.ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s.watch.run(watchCtx)
	}()
	endWatch := func() {
		stopWatch()
		<-watched
	}
	defer endWatch() // on an early return

	s.began = time.Now()
	stopLoad := s.load()
	defer stopLoad() // on an early return
	faultErr := s.inflictAll()
	clearErr := s.clearFaults()
	loadErr := stopLoad()
	out.LoadFor = time.Since(s.began)
	errs := errors.Join(faultErr, clearErr, loadErr)
	if s.ctx.Err() != nil {
		return errs
	}
	// Drained even when a fault went wrong: the accounting says what it
	// cost.
	drainStart := time.Now()
	if err := s.drain(); err != nil {
		return errors.Join(errs, err)
	}
	out.Drain = time.Since(drainStart)
	spend, err := s.storedSpend()
	out.Spend.Stored = spend
	endWatch()
	s.watch.sample(s.ctx) // the last sample: after the drain, before the stop
	s.noteSpread()
	return errors.Join(errs, err)
}

// spreadWithin bounds the wait, after the drain, for the replicas to hold
// an even share of the agents again.
const spreadWithin = 60 * time.Second

// noteSpread notes how soon after the drain each replica held its share
// of the agents (one more or less) per the API, or that none did within
// spreadWithin.
func (s *soak) noteSpread() {
	var all []*service
	for _, r := range s.reps {
		all = append(all, r.svc)
	}
	holders := s.holders()
	share := len(s.agents) / len(holders)
	start := time.Now()
	o, at, err := s.awaitOwners(all, s.agents, spreadWithin, "an even spread", spreadOver(holders, share-1, share+1))
	switch {
	case s.ctx.Err() != nil:
	case err != nil:
		s.note("the agents were not spread evenly %v after the drain: %s", spreadWithin, o.spread(holders))
	default:
		s.note("after the drain the agents were spread %s within %s", o.spread(holders), secs(at.Sub(start)))
	}
}

// setUp starts the nats-server, the redis-server (redis store), the
// provider and the replicas, and waits until the replicas share the
// agents out.
func (s *soak) setUp() error {
	ns, url, err := s.nats()
	if err != nil {
		return err
	}
	s.ns = ns
	storeURL := "" // nats://: KV buckets on the external server
	if s.set.Store == storeRedis {
		if s.rs, storeURL, err = s.redis(); err != nil {
			return err
		}
	}
	if s.prov, err = newProvider(soakSecondDelay); err != nil {
		return err
	}
	if err := os.Setenv("CHAOS_PROVIDER_KEY", "chaos"); err != nil {
		return err
	}
	conf := s.workerConf(url, storeURL)
	var holders []string
	var all []*service
	for i := range soakReplicas {
		w, err := s.worker(fmt.Sprintf("r%d", i+1), conf)
		if err != nil {
			return err
		}
		if err := s.start(w); err != nil {
			return err
		}
		r := &replica{svc: w}
		r.restarted()
		s.reps = append(s.reps, r)
		holders = append(holders, w.name)
		all = append(all, w)
	}
	if err := s.connect(url); err != nil {
		return err
	}
	share := len(s.agents) / len(holders)
	if _, _, err := s.awaitOwners(all, s.agents, 30*time.Second, "the replicas to share the agents out", spreadOver(holders, share-1, share+1)); err != nil {
		return err
	}
	s.watch = newWatch(s.reps, s.agents)
	return nil
}

// workerConf is every replica's config: the provider as an openai model
// with a price, memory folds off (they would be model calls no message
// asked for), the publish tool the provider's turns call.
func (s *soak) workerConf(natsURL, storeURL string) workerConf {
	model := fmt.Sprintf("    provider: openai\n    model: %s\n    base_url: %q\n    api_key_env: CHAOS_PROVIDER_KEY\n", soakModel, s.prov.URL)
	extra := map[string]string{}
	for _, a := range s.agents {
		x := "    publish: [\"ops.reports.>\"]\n" + soakTurn
		if slices.Contains(s.shared, a) {
			x += fmt.Sprintf("    subscribe: [{subject: %q, mode: inbox}]\n", sharedSubject)
		}
		extra[a] = x
	}
	top := fmt.Sprintf("memory: {enabled: false}\npricing: {%s: {input_per_mtok: %v, output_per_mtok: %v}}\n", soakModel, priceIn, priceOut)
	return workerConf{natsURL: natsURL, storeURL: storeURL, heartbeat: time.Second, agents: s.agents,
		model: model, tools: []string{"publish"}, extra: extra, top: top}
}

// holders returns the replicas' lease holder names.
func (s *soak) holders() []string {
	var out []string
	for _, r := range s.reps {
		out = append(out, r.svc.name)
	}
	return out
}

// replica returns the replica named holder.
func (s *soak) replica(holder string) *replica {
	for _, r := range s.reps {
		if r.svc.name == holder {
			return r
		}
	}
	panic("soak: no replica " + holder)
}

// drain waits until every delivery is handled or dead-lettered, or
// soakDrain passes; meanwhile, every keepAliveEvery, each agent still
// owed a delivery gets an inbox message (a deferred message waits for a
// turn). Unaccounted deliveries are not an error here: they are lost.
func (s *soak) drain() error {
	start := time.Now()
	var lastKeep time.Time
	for {
		if err := s.tail.Poll(); err != nil {
			return err
		}
		s.mu.Lock()
		left := s.led.UnaccountedFor(s.owe)
		s.mu.Unlock()
		if len(left) == 0 {
			s.note("drained %s after the load stopped", secs(time.Since(start)))
			return nil
		}
		if time.Since(start) > soakDrain {
			s.note("%d deliveries unaccounted %v after the load stopped", len(left), soakDrain)
			s.askPending(s.agents)
			return nil
		}
		if time.Since(lastKeep) >= keepAliveEvery {
			seen := map[string]bool{}
			for _, d := range left {
				if seen[d.agent] {
					continue
				}
				seen[d.agent] = true
				if _, err := s.send("k", message{agent: d.agent}); err != nil {
					return err
				}
			}
			lastKeep = time.Now()
		}
		if err := sleep(s.ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// storedSpend returns the sum of the agents' session spend as their
// owners hold it (GET /v1/agents: guardrails.session.spent_usd), which is
// kept in the store with every charge and restored by a new owner: the
// spend that survives kill -9, short of a charge not yet stored when its
// replica died.
func (s *soak) storedSpend() (float64, error) {
	var sum float64
	var last error
	err := poll(s.ctx, 30*time.Second, 500*time.Millisecond, "every agent's spend from its owner", func() (bool, error) {
		for _, r := range s.reps {
			if !r.svc.running() {
				continue
			}
			code, body, err := apiCall(s.ctx, http.MethodGet, r.svc.api+"/v1/agents")
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("GET /v1/agents: HTTP %d", code)
			}
			if err != nil {
				last = err
				continue
			}
			var list struct {
				Agents []struct {
					Name       string `json:"name"`
					State      string `json:"state"`
					Guardrails *struct {
						Session struct {
							SpentUSD float64 `json:"spent_usd"`
						} `json:"session"`
					} `json:"guardrails"`
				} `json:"agents"`
			}
			if err := json.Unmarshal(body, &list); err != nil {
				return false, fmt.Errorf("GET /v1/agents: %w", err)
			}
			sum = 0
			n := 0
			for _, a := range list.Agents {
				if a.Guardrails == nil || a.State == "unknown" {
					last = fmt.Errorf("agent %s: state %s, no spend", a.Name, a.State)
					break
				}
				sum += a.Guardrails.Session.SpentUSD
				n++
			}
			return n == len(s.agents), nil
		}
		return false, nil
	})
	if err != nil && last != nil {
		err = fmt.Errorf("%w (last: %v)", err, last)
	}
	return sum, err
}
