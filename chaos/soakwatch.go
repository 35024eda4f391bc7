package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// replica is a worker replica of the soak as its watch sees it: the
// service is the fault loop's alone; cur, the process running now, is
// published to the watch after every start.
type replica struct {
	svc *service
	cur atomic.Pointer[proc]
}

// restarted publishes the replica's new process to the watch.
func (r *replica) restarted() { r.cur.Store(r.svc.p) }

// Watch settings: how often, and how soon a suspected double owner is
// asked again.
const (
	watchEvery   = 2 * time.Second
	watchConfirm = 100 * time.Millisecond
)

// watch samples the replicas in the background: the agents each one says
// it holds (its own entry of GET /v1/replicas), its resident memory
// (VmRSS) and goroutines (go_goroutines), and its model cost counter. Two
// replicas saying they hold one agent, again when asked watchConfirm
// later, is a violation of one owner per agent; seen once only, an
// overlap (the two answers straddled a handover). Its methods are safe
// for concurrent use.
type watch struct {
	reps   []*replica
	agents []string

	mu         sync.Mutex
	samples    int
	unowned    int // samples in which an agent was held by no replica
	unownedMax int // the most agents held by none at once
	overlaps   []string
	violations []string
	stats      map[string]*usage // by replica
	cost       map[*proc]float64 // last cost counter seen, by process life
	failed     int               // scrapes of a live process that failed
}

// usage is one replica's memory and goroutines over the soak: at its
// first sample, the most, and at its last (the harness's last sample,
// after the drain).
type usage struct {
	rssFirst, rssMax, rssLast int64 // KiB
	goFirst, goMax, goLast    int
	rssSeen, goSeen           int      // samples that read them
	heldAtLast                []string // agents held at the last sample
}

func newWatch(reps []*replica, agents []string) *watch {
	w := &watch{reps: reps, agents: agents, stats: map[string]*usage{}, cost: map[*proc]float64{}}
	for _, r := range reps {
		w.stats[r.svc.name] = &usage{}
	}
	return w
}

// run samples every watchEvery until ctx ends.
func (w *watch) run(ctx context.Context) {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.sample(ctx)
		}
	}
}

// scrape is what one live replica answered in one sample.
type scrape struct {
	name       string
	p          *proc
	held       []string
	heldOK     bool
	rss        int64
	goroutines int
	cost       float64
	metricsOK  bool
}

// sample asks every live replica at once, then checks the owners.
func (w *watch) sample(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	live, got := w.scrapeLive(ctx)
	claims, all := claimsOf(got)
	clashes := doubleHeld(claims)
	var confirmed map[string][]string
	if len(clashes) > 0 && sleep(ctx, watchConfirm) == nil {
		confirmed = w.confirm(ctx, live, clashes)
	}

	now := time.Now().Format("15:04:05.000")
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	for _, s := range got {
		w.tally(s)
	}
	if all {
		n := 0
		for _, a := range w.agents {
			if len(claims[a]) == 0 {
				n++
			}
		}
		if n > 0 {
			w.unowned++
			w.unownedMax = max(w.unownedMax, n)
		}
	}
	for _, a := range slices.Sorted(maps.Keys(clashes)) {
		again, ok := confirmed[a]
		if ok {
			w.violations = append(w.violations, fmt.Sprintf("%s held by %s at %s and %s again %v later", a, strings.Join(clashes[a], " and "), now, strings.Join(again, " and "), watchConfirm))
		} else {
			w.overlaps = append(w.overlaps, fmt.Sprintf("%s by %s at %s", a, strings.Join(clashes[a], " and "), now))
		}
	}
}

// scrapeLive scrapes the replicas whose process runs, at once, and
// returns them and what each answered, in the same order.
func (w *watch) scrapeLive(ctx context.Context) ([]*replica, []scrape) {
	var live []*replica
	for _, r := range w.reps {
		if p := r.cur.Load(); p != nil && !p.exited() {
			live = append(live, r)
		}
	}
	got := make([]scrape, len(live))
	var wg sync.WaitGroup
	for i, r := range live {
		wg.Go(func() { got[i] = w.scrape(ctx, r) })
	}
	wg.Wait()
	return live, got
}

// claimsOf returns, by agent, the replicas that say they hold it, and
// whether every scrape told which agents its replica holds (and there
// was one).
func claimsOf(got []scrape) (claims map[string][]string, all bool) {
	claims = map[string][]string{} // agent → replicas holding it
	all = len(got) > 0
	for _, s := range got {
		if !s.heldOK {
			all = false
			continue
		}
		for _, a := range s.held {
			claims[a] = append(claims[a], s.name)
		}
	}
	return claims, all
}

// tally adds one replica's scrape to its usage and the failure count.
// The caller holds w.mu.
func (w *watch) tally(s scrape) {
	u := w.stats[s.name]
	if s.rss > 0 {
		if u.rssSeen == 0 {
			u.rssFirst = s.rss
		}
		u.rssSeen++
		u.rssMax, u.rssLast = max(u.rssMax, s.rss), s.rss
	}
	if s.metricsOK {
		if u.goSeen == 0 {
			u.goFirst = s.goroutines
		}
		u.goSeen++
		u.goMax, u.goLast = max(u.goMax, s.goroutines), s.goroutines
		w.cost[s.p] = s.cost
	}
	if s.heldOK {
		u.heldAtLast = s.held
	}
	if !s.heldOK || !s.metricsOK {
		if !s.p.exited() {
			w.failed++
		}
	}
}

// confirm asks the replicas of clashes again which agents they hold, and
// returns the agents still held by two or more.
func (w *watch) confirm(ctx context.Context, live []*replica, clashes map[string][]string) map[string][]string {
	var ask []*replica
	for _, r := range live {
		for _, holders := range clashes {
			if slices.Contains(holders, r.svc.name) {
				ask = append(ask, r)
				break
			}
		}
	}
	held := make([][]string, len(ask))
	var wg sync.WaitGroup
	for i, r := range ask {
		wg.Go(func() { held[i], _ = heldBy(ctx, r.svc.api) })
	}
	wg.Wait()
	claims := map[string][]string{}
	for i, r := range ask {
		for _, a := range held[i] {
			if _, ok := clashes[a]; ok {
				claims[a] = append(claims[a], r.svc.name)
			}
		}
	}
	return doubleHeld(claims)
}

// doubleHeld returns the agents of claims held by two or more replicas.
func doubleHeld(claims map[string][]string) map[string][]string {
	out := map[string][]string{}
	for a, holders := range claims {
		if len(holders) > 1 {
			out[a] = holders
		}
	}
	return out
}

// scrape asks one replica what it holds and reads its metrics and memory.
func (w *watch) scrape(ctx context.Context, r *replica) scrape {
	p := r.cur.Load()
	s := scrape{name: r.svc.name, p: p}
	var wg sync.WaitGroup
	wg.Go(func() {
		var err error
		s.held, err = heldBy(ctx, r.svc.api)
		s.heldOK = err == nil
	})
	wg.Go(func() {
		m, err := r.svc.metrics(ctx)
		if err != nil {
			return
		}
		g, ok := m["go_goroutines"]
		s.goroutines, s.metricsOK = int(g), ok
		s.cost = costCounter(m)
	})
	s.rss = vmRSS(p.cmd.Process.Pid)
	wg.Wait()
	return s
}

// heldBy returns the agents the replica at api says it holds: its own
// entry of GET /v1/replicas.
func heldBy(ctx context.Context, api string) ([]string, error) {
	code, body, err := apiCall(ctx, http.MethodGet, api+"/v1/replicas")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/replicas: HTTP %d", code)
	}
	var list struct {
		Replicas []struct {
			Self   bool     `json:"self"`
			Agents []string `json:"agents"`
		} `json:"replicas"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	for _, r := range list.Replicas {
		if r.Self {
			return r.Agents, nil
		}
	}
	return nil, fmt.Errorf("GET /v1/replicas: no entry for the replica itself")
}

// costCounter sums agent_worker_model_cost_usd_total over its series.
func costCounter(m map[string]float64) float64 {
	sum := 0.0
	for k, v := range m {
		if strings.HasPrefix(k, "agent_worker_model_cost_usd_total{") || k == "agent_worker_model_cost_usd_total" {
			sum += v
		}
	}
	return sum
}

// vmRSS returns the resident memory of pid in KiB, 0 if unknown.
func vmRSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kib, _ := strconv.ParseInt(f[1], 10, 64)
			return kib
		}
	}
	return 0
}

// held returns the agents replica said it held at its last sample.
func (w *watch) held(replica string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats[replica].heldAtLast
}

// costOfLives sums the last cost counter seen of every process life: what
// /metrics showed of the spend, short of what each killed process spent
// after its last sample.
func (w *watch) costOfLives() float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	sum := 0.0
	for _, c := range w.cost {
		sum += c
	}
	return sum
}
