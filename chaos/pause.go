package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"time"
)

// The pause scenario's timing.
const (
	// pauseLoadEvery is how often a message goes out, round-robin.
	pauseLoadEvery = 50 * time.Millisecond
	// pauseFrozen is how long a replica stays stopped: three lease ttls
	// (3 s), so that the other takes its agents over well before it
	// wakes.
	pauseFrozen = 10 * time.Second
	// pauseAfter is how long the load runs on after each thaw: the woken
	// replica finds its leases gone and the agents are spread again.
	pauseAfter = 6 * time.Second
)

// pauseScript answers every turn after 400 ms: a freeze usually lands
// mid-turn, with the model's answer in and its record not yet written.
const pauseScript = `
      - text: "handled"
        delay: 400ms
        usage: {input: 100, output: 10}`

// pauseModels are the approval's and the subagent's agents' models: one
// asks, in its first turn, for a call that needs an operator's approval,
// one spawns a subagent in its first, whose own model takes long enough
// to be running across a freeze; each has one more answer, for the turn
// that tells it the outcome, and none after (no loop).
const pauseModels = `  asker:
    provider: scripted
    script:
      - call: {name: report_done, args: {summary: "restart the payment gateway"}}
        usage: {input: 100, output: 10}
      - text: "asked for approval"
        usage: {input: 100, output: 10}
      - text: "told of the decision"
        usage: {input: 100, output: 10}
  spawner:
    provider: scripted
    script:
      - call: {name: spawn_subagent, args: {task: "scan the payment logs"}}
        usage: {input: 100, output: 10}
      - text: "spawned"
        usage: {input: 100, output: 10}
      - text: "read the report"
        usage: {input: 100, output: 10}
  slow:
    provider: scripted
    script:
      - text: "scanned: nothing found"
        delay: 14s
        usage: {input: 100, output: 10}
    loop: true
`

// pause: two replicas, each in turn frozen with SIGSTOP for three lease
// ttls while it runs turns, then let go on with SIGCONT: a stop-the-world
// pause, a VM freeze. The frozen replica must do nothing visible once it
// wakes (its turns whose leases moved are abandoned, never completed),
// and the agent its freeze left with an approval pending and a subagent
// running must come out with one approval and one report.
func pause(e *env) error { return pauseOn(e, "kv") }

// pauseRedis is pause with the state in Redis.
func pauseRedis(e *env) error { return pauseOn(e, "redis") }

// pauseRun is the pause scenario's state, phase to phase.
type pauseRun struct {
	e        *env
	backend  string
	holders  []string
	agents   []string // the loaded ones
	reps     map[string]*service
	all      []*service
	approval string // the pending approval's id
}

func pauseOn(e *env, backend string) error {
	r := &pauseRun{e: e, backend: backend, holders: []string{"r1", "r2"}, agents: numbered("a", 20)}
	r.story()
	stopLoad, err := r.setUp()
	if err != nil {
		return err
	}
	defer stopLoad() // on an early return
	if err := r.heldWork(); err != nil {
		return err
	}
	// r1 holds the approval's and the subagent's agents (replica
	// affinity) and runs the subagent: it is frozen first.
	for _, victim := range r.holders {
		if err := r.freeze(victim); err != nil {
			return err
		}
	}
	if err := stopLoad(); err != nil {
		return err
	}
	if err := e.drain(drainTimeout, r.agents); err != nil {
		return err
	}
	return errors.Join(r.checkHeldWork(), r.checkAbandoned())
}

// story tells what the scenario does and promises.
func (r *pauseRun) story() {
	e := r.e
	store := "its JetStream KV store"
	if r.backend == "redis" {
		store = "a redis-server holding the state"
	}
	e.story("Two replicas (r1, r2; lease ttl 3 s, heartbeat 1 s) shared one external nats-server and %s, with %d agents (a01–a20) whose turns take 400 ms; one message went every %s round-robin to them throughout.", store, len(r.agents), human(pauseLoadEvery))
	e.story("Two more agents were pinned to r1 (replica_affinity): ap, whose one turn asked for a call that needs an operator's approval, and sp, whose one turn spawned a subagent that takes 14 s (r2 runs no subagents, so it ran on r1).")
	e.story("Each replica in turn, r1 first, was frozen with SIGSTOP as soon as its API showed one of its agents running a turn, for %s (more than three lease ttls: the other replica took its agents over meanwhile), then let go on with SIGCONT; the load ran on for %s after each thaw.", human(pauseFrozen), human(pauseAfter))
	e.story("A woken replica must do nothing visible: a turn whose lease moved while it was frozen records nothing and is abandoned (\"turn abandoned: lease moved\"), never completed, so no message is handled twice; the agents it takes back are read from the store, never run from its stale state.")
	e.story("After the freezes, ap had to have its one approval pending (approved then, once: a second approval is refused), and sp's subagent had to report once.")
	e.story("Recovery: from each freeze to the first completed turn, on the other replica, of an agent the frozen one held.")
}

// setUp starts the servers and the two replicas, and the load.
func (r *pauseRun) setUp() (stopLoad func() error, err error) {
	e := r.e
	_, url, err := e.nats()
	if err != nil {
		return nil, err
	}
	storeURL := ""
	if r.backend == "redis" {
		if _, storeURL, err = e.redis(); err != nil {
			return nil, err
		}
	}
	all := append(append([]string(nil), r.agents...), "ap", "sp")
	c := workerConf{natsURL: url, storeURL: storeURL, agents: all, script: pauseScript, unthrottled: true, heartbeat: time.Second,
		tools:      []string{"schedule_next_turn", "report_done", "spawn_subagent"},
		models:     pauseModels,
		agentModel: map[string]string{"ap": "asker", "sp": "spawner"},
		extra: map[string]string{
			"ap": "    replica_affinity: r1\n    approval: [report_done]\n",
			"sp": "    replica_affinity: r1\n    subagents: {model: slow, timeout: 2m}\n",
		}}
	r.reps = map[string]*service{}
	for _, h := range r.holders {
		hc := c
		if h != "r1" {
			hc.top = "subagents: {max_per_replica: 0}\n"
		}
		w, err := e.worker(h, hc)
		if err != nil {
			return nil, err
		}
		if err := e.start(w); err != nil {
			return nil, err
		}
		r.reps[h] = w
		r.all = append(r.all, w)
	}
	if err := e.connect(url); err != nil {
		return nil, err
	}
	if _, _, err := e.awaitOwners(r.all, all, spreadDeadline, "ap and sp on r1, the others on both",
		func(o owners) bool { return o["ap"] == "r1" && o["sp"] == "r1" && len(o.of("r2")) > 0 }); err != nil {
		return nil, err
	}
	return e.loadUntil(pauseLoadEvery, r.agents), nil
}

// heldWork has ap ask for its approval and sp spawn its subagent, on r1,
// and waits for both.
func (r *pauseRun) heldWork() error {
	e := r.e
	for _, a := range []string{"ap", "sp"} {
		if _, err := e.pub.publish(e.ctx, "h", message{agent: a}); err != nil {
			return err
		}
	}
	return poll(e.ctx, 20*time.Second, 100*time.Millisecond, "ap's approval pending and sp's subagent started", func() (bool, error) {
		if err := e.tail.Poll(); err != nil {
			return false, err
		}
		ids, err := r.pending()
		if err != nil || len(ids) != 1 {
			return false, nil
		}
		r.approval = ids[0]
		return logged(r.reps["r1"].log, `"msg":"subagent started"`), nil
	})
}

// pending lists ap's pending approvals, asking the replicas in turn.
func (r *pauseRun) pending() ([]string, error) {
	var last error
	for _, s := range r.all {
		code, body, err := apiCall(r.e.ctx, http.MethodGet, s.api+"/v1/agents/ap/approvals")
		if err != nil || code != http.StatusOK {
			last = fmt.Errorf("GET approvals of ap on %s: %d %v %s", s.name, code, err, body)
			continue
		}
		var list []struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			return nil, err
		}
		var ids []string
		for _, x := range list {
			ids = append(ids, x.ID)
		}
		return ids, nil
	}
	return nil, last
}

// freeze stops victim with SIGSTOP while it runs a turn, waits, and lets
// it go on.
func (r *pauseRun) freeze(victim string) error {
	e := r.e
	w := r.reps[victim]
	first, _, err := e.awaitOwners(r.all, r.agents, spreadDeadline, "both replicas to own agents",
		func(o owners) bool { return len(o.of("r1")) > 0 && len(o.of("r2")) > 0 })
	if err != nil {
		return err
	}
	held := first.of(victim)
	if victim == "r1" {
		held = append(held, "ap", "sp")
	}
	// Catch one of its agents running, so the freeze lands mid-turn.
	running := poll(e.ctx, 3*time.Second, 10*time.Millisecond, "a turn of "+victim+" to run", func() (bool, error) {
		for _, a := range held {
			if st, err := w.status(e.ctx, a); err == nil && st.State == "running" && st.Owner == victim {
				return true, nil
			}
		}
		return false, nil
	}) == nil
	w.p.signal(syscall.SIGSTOP)
	frozen := time.Now()
	other := r.holders[0]
	if other == victim {
		other = r.holders[1]
	}
	e.cleared(frozen, held, other)
	if err := sleep(e.ctx, pauseFrozen); err != nil {
		w.p.signal(syscall.SIGCONT)
		return err
	}
	w.p.signal(syscall.SIGCONT)
	thawed := time.Now()
	e.note("%s frozen %s (SIGSTOP%s) holding %d agents, then SIGCONT", victim, secs(thawed.Sub(frozen)), when(running, " mid-turn"), len(held))
	if err := sleep(e.ctx, pauseAfter); err != nil {
		return err
	}
	if err := e.tail.Poll(); err != nil {
		return err
	}
	n := 0
	for _, f := range e.led.FailuresSince(frozen) {
		if f.Source == victim && f.Outcome == "abandoned" {
			n++
		}
	}
	e.note("after the thaw %s abandoned %d turn(s) whose lease had moved", victim, n)
	return nil
}

// checkHeldWork checks that ap's approval came through the freezes once,
// and sp's subagent reported once.
func (r *pauseRun) checkHeldWork() error {
	e := r.e
	ids, err := r.pending()
	if err != nil {
		return err
	}
	if !slices.Equal(ids, []string{r.approval}) {
		e.broken("ap's pending approvals after the freezes are %v, want the one from before them, %s", ids, r.approval)
	} else {
		codes := []int{}
		for range 2 {
			code, body, err := r.decide()
			if err != nil {
				return err
			}
			codes = append(codes, code)
			_ = body
		}
		if codes[0]/100 != 2 || codes[1] < 400 {
			e.broken("approving %s twice answered %v, want 2xx then a refusal", r.approval, codes)
		} else {
			e.note("ap's approval %s was pending once after both freezes; approved (%d), a second approval refused (%d)", r.approval, codes[0], codes[1])
		}
	}
	reports := map[string]int{}
	for _, c := range e.led.CompletionsOf("sp") {
		for _, id := range c.IDs {
			if strings.HasPrefix(id, "sp-sub-") {
				reports[id]++
			}
		}
	}
	switch {
	case len(reports) == 1 && reports["sp-sub-1"] == 1:
		e.note("sp's subagent (sp-sub-1) reported once, and the report was handled by one completed turn")
	case len(reports) == 0:
		e.broken("sp's subagent report was never handled")
	default:
		e.broken("sp's subagents' reports were handled %v times, want sp-sub-1 once", reports)
	}
	told := poll(e.ctx, 10*time.Second, 100*time.Millisecond, "ap to be told of the decision", func() (bool, error) {
		if err := e.tail.Poll(); err != nil {
			return false, err
		}
		return len(e.led.CompletionsOf("ap")) >= 2, nil
	})
	if told != nil {
		e.broken("ap was not told of its approval's decision: %v", told)
	}
	return nil
}

// decide approves ap's approval through the owner's API (any replica
// forwards it).
func (r *pauseRun) decide() (int, []byte, error) {
	var last error
	for _, s := range r.all {
		code, body, err := apiCall(r.e.ctx, http.MethodPost, s.api+"/v1/agents/ap/approvals/"+r.approval+"/approve")
		if err == nil {
			return code, body, nil
		}
		last = err
	}
	return 0, nil, last
}

// checkAbandoned notes the let-gos and take-backs the replicas logged.
func (r *pauseRun) checkAbandoned() error {
	e := r.e
	for _, l := range e.led.LetGos() {
		e.note("%s let every agent go at %s (%s, %d agents)", l.Source, l.Time.Format("15:04:05.000"), l.Why, l.Agents)
	}
	for _, l := range e.led.TakenBack() {
		e.note("%s took back %d of the %d it let go, unchanged (nobody had taken them)", l.Source, l.Agents, l.Of)
	}
	return nil
}
