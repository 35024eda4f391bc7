package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/access"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/models/scripted"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/scheduler"
	"github.com/agent-worker/agent-worker/seal"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// deadline bounds every wait; waits end as soon as their condition holds.
const deadline = 20 * time.Second

var subjects = natsbus.Subjects{Prefix: "agents"}

// Every call of the priced model reports 100k input tokens: at $10 per
// million, $1.
var prices = map[string]config.Price{"priced-1": {InputPerMTok: 10}}

// owned is a replica's set of owned agents, changeable while it runs,
// and the ones its word on is in doubt (control.Doubter).
type owned struct {
	mu     sync.Mutex
	agents map[string]bool
	doubts map[string]string
}

func (o *owned) Doubt(agent string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.doubts[agent]
}

func (o *owned) doubt(agent, why string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.doubts == nil {
		o.doubts = map[string]string{}
	}
	o.doubts[agent] = why
}

func (o *owned) Owns(agent string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.agents[agent]
}

func (o *owned) Fence(agent string) (store.Fence, bool) { return store.Fence{}, o.Owns(agent) }

func (o *owned) set(agent string, own bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.agents[agent] = own
}

// replica is one worker's driver, guard and scheduler behind a Control
// on the shared NATS server. Its agents: alpha (unpriced, schedule
// nightly) and beta (priced, $1 session ceiling).
type replica struct {
	name   string
	owner  *owned
	driver *driver.Driver
	guard  *guard.Guard
	models map[string]*scripted.Model
	ctl    *control.Control
	nc     *nats.Conn
	sub    *nats.Subscription
}

func runNATS(t *testing.T) string {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(ns.Shutdown)
	return ns.ClientURL()
}

func connect(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// testKey is the test deployment's sealing key, which every replica of
// newReplica shares.
// as returns ctx carrying an operate caller named name: what the API
// sets for every request it lets in (control.WithCaller).
func as(ctx context.Context, name string) context.Context {
	return control.WithCaller(ctx, access.Caller{Name: name, Role: access.RoleOperate})
}

var testKey = seal.NewKey([]byte("a test deployment's sealing key!"))

// newReplica starts a replica owning the agents in owns. serve: it
// answers on the control subjects. Its Control seals with testKey and,
// without tokens, takes requests without one: the test's NATS server
// listens on loopback only, as the embedded one does by default.
func newReplica(t *testing.T, url, name string, serve bool, owns ...string) *replica {
	t.Helper()
	return newReplicaWith(t, url, name, serve, nil, owns...)
}

// newReplicaWith is newReplica with more Options set by opt (nil: none).
func newReplicaWith(t *testing.T, url, name string, serve bool, opt func(*control.Options), owns ...string) *replica {
	t.Helper()
	st := memstore.New(nil)
	r := &replica{name: name, owner: &owned{agents: map[string]bool{}}, models: map[string]*scripted.Model{}}
	for _, a := range owns {
		r.owner.set(a, true)
	}
	sched := scheduler.New(scheduler.Options{Store: st})
	r.guard = guard.New(guard.Options{Store: st, Prices: guard.NewPrices(prices), Owner: r.owner})
	var specs []driver.Spec
	for _, a := range []struct {
		name, model string
		limits      guard.Limits
		schedules   []scheduler.Schedule
	}{
		{"alpha", "fake-1", guard.Limits{}, []scheduler.Schedule{{Name: "nightly", Cron: "0 3 * * *", Prompt: "nightly report", Enabled: true}}},
		{"beta", "priced-1", guard.Limits{SessionUSD: 1}, nil},
	} {
		m, err := scripted.New(a.model, config.Model{Model: a.model, Script: []config.ScriptStep{scripted.Text("done by "+name, 10, 1)}, Loop: true})
		if err != nil {
			t.Fatal(err)
		}
		r.models[a.name] = m
		r.guard.AddAgent(a.name, a.model, a.limits)
		specs = append(specs, driver.Spec{Name: a.name, Model: m, Tools: []string{"report_done"}, HistoryTurns: 5, Schedules: a.schedules})
	}
	var err error
	r.driver, err = driver.New(driver.Deps{Store: st, Scheduler: sched, Guards: []hook.Guard{r.guard}}, specs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.driver.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.driver.Shutdown(context.Background()); cancel() })
	view := func(agent string) (json.RawMessage, error) {
		a, err := r.driver.Agent(agent)
		if err != nil {
			return nil, err
		}
		st := a.Status()
		return json.Marshal(map[string]any{"name": agent, "built_by": name, "paused": st.Paused, "turns": st.Turns})
	}
	r.nc = connect(t, url)
	o := control.Options{Driver: r.driver, Guard: r.guard, Owner: r.owner, Holder: name,
		Conn: r.nc, Subjects: subjects, Timeout: 500 * time.Millisecond, View: view, Seal: testKey, LoopbackNATS: true}
	if opt != nil {
		opt(&o)
	}
	r.ctl, err = control.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if serve {
		r.sub, err = r.ctl.ServeNATS()
		if err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r *replica) agent(t *testing.T, name string) *driver.Agent {
	t.Helper()
	a, err := r.driver.Agent(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// request sends a raw control request as any NATS client would.
func request(t *testing.T, nc *nats.Conn, agent string, req control.Request, timeout time.Duration) (control.Reply, error) {
	t.Helper()
	data, _ := json.Marshal(req)
	m, err := nc.Request(subjects.Control(agent), data, timeout)
	if err != nil {
		return control.Reply{}, err
	}
	var r control.Reply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		t.Fatalf("reply %q: %v", m.Data, err)
	}
	return r, nil
}

// TestOnlyTheOwnerAnswers: with two replicas subscribed, a request on an
// agent's control subject is answered by its owner alone; a replica that
// does not own the agent sends no reply at all, also for an agent nobody
// knows, so a requester waiting on it times out rather than getting a
// standby's answer.
func TestOnlyTheOwnerAnswers(t *testing.T) {
	t.Parallel()
	url := runNATS(t)
	a := newReplica(t, url, "replica-a", true, "alpha", "beta")
	b := newReplica(t, url, "replica-b", true)
	nc := connect(t, url)

	for range 5 { // either may be first to get the request; only a answers
		r, err := request(t, nc, "alpha", control.Request{Verb: control.VerbView}, deadline)
		if err != nil || !r.OK || r.Owner != "replica-a" || !strings.Contains(string(r.Result), `"built_by":"replica-a"`) {
			t.Fatalf("view: %+v, %v", r, err)
		}
	}

	// Only b listens now: it owns nothing, so it stays silent.
	if err := a.sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	_, err := request(t, nc, "alpha", control.Request{Verb: control.VerbPause}, 300*time.Millisecond)
	if !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("a non-owner answered (or something else happened): %v", err)
	}
	if b.agent(t, "alpha").Status().Paused || a.agent(t, "alpha").Status().Paused {
		t.Fatal("a pause nobody owns was carried out")
	}
	if _, err := request(t, nc, "ghost", control.Request{Verb: control.VerbPause}, 300*time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("a request for an unknown agent was answered: %v", err)
	}
	// Once b owns the agent, b answers.
	b.owner.set("alpha", true)
	if r, err := request(t, nc, "alpha", control.Request{Verb: control.VerbPause}, deadline); err != nil || !r.OK || r.Owner != "replica-b" || r.State != string(driver.Paused) {
		t.Fatalf("pause on the new owner: %+v, %v", r, err)
	}
}

// TestDoCarriesVerbsToTheOwner: Do on a replica that does not own the
// agent forwards the verb: the owner's agent is paused and resumed, the
// requester's own copy is untouched, and the reply (view included) is the
// owner's.
func TestDoCarriesVerbsToTheOwner(t *testing.T) {
	t.Parallel()
	url := runNATS(t)
	a := newReplica(t, url, "replica-a", true, "alpha", "beta")
	b := newReplica(t, url, "replica-b", true)
	ctx := t.Context()

	r, err := b.ctl.Do(as(ctx, "ops"), "alpha", control.Request{Verb: control.VerbPause})
	if err != nil || !r.OK || r.Owner != "replica-a" || r.State != string(driver.Paused) || r.Status() != http.StatusOK {
		t.Fatalf("pause via b: %+v, %v", r, err)
	}
	if !a.agent(t, "alpha").Status().Paused {
		t.Fatal("the owner's agent is not paused")
	}
	if b.agent(t, "alpha").Status().Paused {
		t.Fatal("the non-owner paused its own copy of the agent")
	}
	r, err = b.ctl.Do(as(ctx, "ops"), "alpha", control.Request{Verb: control.VerbWake})
	if err != nil || r.OK || r.Status() != http.StatusConflict || !strings.Contains(r.Error, "paused") {
		t.Fatalf("wake of the owner's paused agent: %+v, %v", r, err)
	}
	r, err = b.ctl.Do(as(ctx, "ops"), "alpha", control.Request{Verb: control.VerbView})
	if err != nil || !r.OK || string(r.Result) != `{"built_by":"replica-a","name":"alpha","paused":true,"turns":0}` {
		t.Fatalf("view via b: %s, %+v, %v", r.Result, r, err)
	}
	r, err = b.ctl.Do(as(ctx, "ops"), "alpha", control.Request{Verb: control.VerbResume, Message: "go on"})
	if err != nil || !r.OK || r.Owner != "replica-a" {
		t.Fatalf("resume via b: %+v, %v", r, err)
	}
	wait.For(t, "one turn on the owner", func() bool { return a.models["alpha"].Calls() == 1 })
	if n := b.models["alpha"].Calls(); n != 0 {
		t.Fatalf("the non-owner ran %d model calls", n)
	}
	// The owner itself answers locally, with no NATS at all.
	local, err := control.New(control.Options{Driver: a.driver, Guard: a.guard, Owner: a.owner, Holder: "replica-a"})
	if err != nil {
		t.Fatal(err)
	}
	r, err = local.Do(ctx, "alpha", control.Request{Verb: control.VerbInterrupt})
	if err != nil || !r.OK || r.TurnRunning == nil {
		t.Fatalf("local interrupt: %+v, %v", r, err)
	}
	r, err = b.ctl.Do(as(ctx, "ops"), "alpha", control.Request{Verb: "dance"})
	if err != nil || r.Status() != http.StatusBadRequest {
		t.Fatalf("unknown verb: %+v, %v", r, err)
	}
}

// TestResetRunsAgainstTheOwnersLedger: a reset sent to a non-owner is
// refused with the owner's numbers (409, result intact), and with enough
// budget lifts the owner's trip. The non-owner's own ledger, never
// restored, would have let the reset through at $0.
func TestResetRunsAgainstTheOwnersLedger(t *testing.T) {
	t.Parallel()
	url := runNATS(t)
	a := newReplica(t, url, "replica-a", true, "alpha", "beta")
	b := newReplica(t, url, "replica-b", true)
	ctx := t.Context()
	if err := a.guard.Restore(ctx, "beta"); err != nil {
		t.Fatal(err)
	}
	a.guard.Charge("beta", 2.5) // over the $1 session ceiling: tripped
	wait.For(t, "the owner's agent halted", func() bool { return a.agent(t, "beta").State() == driver.Halted })

	// Resume and wake cannot run a turn behind the halt: they say so, and
	// how to lift it, instead of answering ok.
	for _, verb := range []string{control.VerbResume, control.VerbWake} {
		r, err := b.ctl.Do(as(ctx, "ops"), "beta", control.Request{Verb: verb})
		want := "agent \"beta\" is halted by session_usd"
		if err != nil || r.OK || r.Status() != http.StatusConflict || !strings.Contains(r.Error, want) ||
			!strings.Contains(r.Error, "run `agent-worker reset beta session_usd --add-budget USD`") {
			t.Fatalf("%s of a halted agent: %+v, %v", verb, r, err)
		}
	}
	r, err := b.ctl.Do(as(ctx, "ops"), "beta", control.Request{Verb: control.VerbReset, Guardrail: guard.Session})
	if err != nil || r.OK || r.Status() != http.StatusConflict || r.Owner != "replica-a" {
		t.Fatalf("reset without budget: %+v, %v", r, err)
	}
	var refusal struct {
		Error     string  `json:"error"`
		Guardrail string  `json:"guardrail"`
		Spent     float64 `json:"spent_usd"`
		Ceiling   float64 `json:"ceiling_usd"`
		MinAdd    float64 `json:"min_add_budget_usd"`
	}
	if err := json.Unmarshal(r.Result, &refusal); err != nil || refusal.Guardrail != guard.Session || refusal.Spent != 2.5 ||
		refusal.Ceiling != 1 || refusal.MinAdd != 1.51 || !strings.Contains(refusal.Error, "spent $2.50 against a ceiling of $1 would trip again at once; $1.50 over it: add more than $1.50 (e.g. $1.51)") {
		t.Fatalf("refusal %s: %v", r.Result, err)
	}
	r, err = b.ctl.Do(as(ctx, "ops"), "beta", control.Request{Verb: control.VerbReset, Guardrail: guard.Session, AddBudgetUSD: 5})
	var res guard.ResetResult
	if err != nil || !r.OK || json.Unmarshal(r.Result, &res) != nil || !res.Cleared || res.SpentUSD != 2.5 || res.CeilingUSD != 6 {
		t.Fatalf("reset with budget: %s %+v, %v", r.Result, r, err)
	}
	wait.For(t, "the owner's agent reopened", func() bool { return a.agent(t, "beta").State() != driver.Halted })
	r, err = b.ctl.Do(as(ctx, "ops"), "beta", control.Request{Verb: control.VerbReset})
	if err != nil || r.Status() != http.StatusBadRequest {
		t.Fatalf("reset without a guardrail: %+v, %v", r, err)
	}
}

// TestRunScheduleFiresOnTheOwner: run_schedule sent to a non-owner fires
// the schedule on the owner (202, its next fire), 404 for an unknown
// schedule, 409 behind the owner's gate.
func TestRunScheduleFiresOnTheOwner(t *testing.T) {
	t.Parallel()
	url := runNATS(t)
	a := newReplica(t, url, "replica-a", true, "alpha", "beta")
	b := newReplica(t, url, "replica-b", true)
	ctx := t.Context()

	r, err := b.ctl.Do(as(ctx, "ops"), "alpha", control.Request{Verb: control.VerbRunSchedule, Schedule: "nightly"})
	var run control.ScheduleRun
	if err != nil || r.Status() != http.StatusAccepted || json.Unmarshal(r.Result, &run) != nil || !run.Queued || run.Schedule != "nightly" || run.NextFire == nil {
		t.Fatalf("run: %s %+v, %v", r.Result, r, err)
	}
	wait.For(t, "the schedule's turn on the owner", func() bool { return a.models["alpha"].Calls() == 1 })
	if n := b.models["alpha"].Calls(); n != 0 {
		t.Fatalf("the non-owner ran the schedule: %d model calls", n)
	}
	if r, err := b.ctl.Do(as(ctx, "ops"), "alpha", control.Request{Verb: control.VerbRunSchedule, Schedule: "weekly"}); err != nil || r.Status() != http.StatusNotFound {
		t.Fatalf("unknown schedule: %+v, %v", r, err)
	}
	a.agent(t, "alpha").Pause()
	if r, err := b.ctl.Do(as(ctx, "ops"), "alpha", control.Request{Verb: control.VerbRunSchedule, Schedule: "nightly"}); err != nil || r.Status() != http.StatusConflict || !strings.Contains(r.Error, "paused") {
		t.Fatalf("run while the owner's agent is paused: %+v, %v", r, err)
	}
}

// TestNoOwnerIsAnErrorNotASuccess: with no replica owning the agent, Do
// returns ErrNoOwner within its timeout — whether replicas listen (and
// stay silent) or nobody does — and nothing is carried out anywhere.
func TestNoOwnerIsAnErrorNotASuccess(t *testing.T) {
	t.Parallel()
	url := runNATS(t)
	b := newReplica(t, url, "replica-b", true)
	began := time.Now()
	_, err := b.ctl.Do(as(t.Context(), "ops"), "alpha", control.Request{Verb: control.VerbPause})
	if !errors.Is(err, control.ErrNoOwner) || !strings.Contains(err.Error(), `no replica owns agent "alpha" right now (no owner answered`) {
		t.Fatalf("silent replicas: %v", err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("took %v, beyond the 500ms timeout", took)
	}
	if b.agent(t, "alpha").Status().Paused {
		t.Fatal("the non-owner paused its own copy")
	}

	c := newReplica(t, url, "replica-c", false) // nobody listens at all
	if err := b.sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := b.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ctl.Do(as(t.Context(), "ops"), "alpha", control.Request{Verb: control.VerbView}); !errors.Is(err, control.ErrNoOwner) || !strings.Contains(err.Error(), "no replica listens") {
		t.Fatalf("no responders: %v", err)
	}
	// Applied directly on a replica that does not own the agent: refused.
	if r := c.ctl.Apply("alpha", control.Request{Verb: control.VerbPause}); r.OK || r.Status() != http.StatusServiceUnavailable {
		t.Fatalf("Apply on a non-owner: %+v", r)
	}
}

// An owner whose lease is in doubt (its renewal unconfirmed: another
// replica may own the agent by now) neither applies a verb nor answers a
// forwarded one: asked here it says the owner is unknown, and the others'
// forwards get no answer from it. Once sure again it answers.
func TestAnOwnerInDoubtNeitherAnswersNorActs(t *testing.T) {
	t.Parallel()
	url := runNATS(t)
	a := newReplica(t, url, "replica-a", true, "alpha")
	b := newReplica(t, url, "replica-b", true)
	a.owner.doubt("alpha", "its lease is unconfirmed")

	_, err := a.ctl.Do(as(t.Context(), "ops"), "alpha", control.Request{Verb: control.VerbPause})
	var no *control.NoOwnerError
	if !errors.As(err, &no) || !no.Unknown || err.Error() != `owner of agent "alpha" unknown right now: its lease is unconfirmed; retry` {
		t.Fatalf("asked on the owner in doubt: %v", err)
	}
	if r := a.ctl.Apply("alpha", control.Request{Verb: control.VerbPause}); r.OK || r.Status() != http.StatusServiceUnavailable || !strings.Contains(r.Error, "unknown") {
		t.Fatalf("Apply on the owner in doubt: %+v", r)
	}
	if _, err := b.ctl.Do(as(t.Context(), "ops"), "alpha", control.Request{Verb: control.VerbView}); !errors.Is(err, control.ErrNoOwner) || !strings.Contains(err.Error(), "no owner answered") {
		t.Fatalf("forwarded to the owner in doubt: %v", err)
	}
	if a.agent(t, "alpha").Status().Paused {
		t.Fatal("the owner in doubt carried out a pause")
	}

	a.owner.doubt("alpha", "")
	reply, err := b.ctl.Do(as(t.Context(), "ops"), "alpha", control.Request{Verb: control.VerbView})
	if err != nil || !reply.OK || !strings.Contains(string(reply.Result), `"built_by":"replica-a"`) {
		t.Fatalf("once sure again: %+v, %v", reply, err)
	}
}

// A replica whose NATS connection is down says at once that it cannot
// tell the owner, instead of waiting out the timeout in the reconnect
// buffer and reporting that no replica owns the agent.
func TestNATSDownMakesTheOwnerUnknownAtOnce(t *testing.T) {
	t.Parallel()
	url := runNATS(t)
	newReplica(t, url, "replica-a", true, "alpha")
	b := newReplicaWith(t, url, "replica-b", false, func(o *control.Options) { o.Timeout = time.Hour })
	b.nc.Close()
	_, err := b.ctl.Do(as(t.Context(), "ops"), "alpha", control.Request{Verb: control.VerbView})
	var no *control.NoOwnerError
	if !errors.As(err, &no) || !no.Unknown || !strings.Contains(err.Error(), `owner of agent "alpha" unknown right now: NATS closed`) {
		t.Fatalf("NATS down: %v", err)
	}
}
