package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/adk/model"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/models"
	"github.com/agent-worker/agent-worker/models/scripted"
	"github.com/agent-worker/agent-worker/scheduler"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// deadline bounds every wait. It is a failure guard, not a sleep: waits
// return as soon as what they wait for happens.
const deadline = 20 * time.Second

var epoch = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// Tokens every world accepts.
const (
	readToken    = "read-secret-7f3a"
	operateToken = "operate-secret-91cc"
)

var tokens = []api.Token{
	{Name: "dashboard", Role: api.RoleRead, Value: readToken},
	{Name: "ops", Role: api.RoleOperate, Value: operateToken},
}

// Every call of the priced model reports 100k input tokens: at $10 per
// million, exactly $1.
var prices = map[string]config.Price{"priced-1": {InputPerMTok: 10}}

type agentDef struct {
	name      string
	model     string // the name pricing looks up
	script    []config.ScriptStep
	limits    guard.Limits
	schedules []scheduler.Schedule
	memory    driver.MemorySpec // off unless set
	// switchable: the agent's model is a models.Switch, its own model
	// under the key "main", these the others it may be switched to.
	switchable map[string]config.Model
}

// alpha is an unpriced agent with a nightly schedule and a session
// ceiling (which binds nothing: it is unpriced, but it can be reset).
func alpha() agentDef {
	return agentDef{
		name: "alpha", model: "fake-1",
		script:    []config.ScriptStep{scripted.Text("all quiet", 1200, 80)},
		limits:    guard.Limits{SessionUSD: 100},
		schedules: []scheduler.Schedule{{Name: "nightly", Cron: "0 3 * * *", Prompt: "write the nightly report", Enabled: true}},
	}
}

// beta runs on a priced model with a $1 session ceiling: its first turn
// trips it.
func beta() agentDef {
	return agentDef{
		name: "beta", model: "priced-1",
		script: []config.ScriptStep{{Text: "expensive", Usage: config.Usage{Input: 100_000}}},
		limits: guard.Limits{SessionUSD: 1},
	}
}

type world struct {
	t      *testing.T
	clock  *clock.Fake
	bus    *events.Bus
	sub    *events.Subscription
	guard  *guard.Guard
	sched  *scheduler.Scheduler
	driver *driver.Driver
	models map[string]*scripted.Model
	srv    *api.Server
	ts     *httptest.Server
	logs   *syncBuffer
	store  *memstore.Store // the agents' state: history, ledgers, ...
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// newWorld runs a real driver (scripted models, memory store, real
// scheduler and guard, all on a fake clock) behind the API on an httptest
// server. Unset fields of o get: tokens, the world's driver, guard,
// scheduler and bus, and the fake clock.
func newWorld(t *testing.T, o api.Options, agents ...agentDef) *world {
	t.Helper()
	if len(agents) == 0 {
		agents = []agentDef{alpha(), beta()}
	}
	c := clock.NewFake(epoch)
	st := memstore.New(c)
	w := &world{t: t, clock: c, models: map[string]*scripted.Model{}, logs: &syncBuffer{}, store: st}
	log := slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w.bus = o.Events
	if w.bus == nil {
		w.bus = events.NewBus(0, nil)
	}
	w.sub = w.bus.Subscribe(10000, nil)
	t.Cleanup(w.sub.Close)
	w.sched = scheduler.New(scheduler.Options{Store: st, Clock: c, Log: log, Events: w.bus})
	w.guard = guard.New(guard.Options{Store: st, Clock: c, Log: log, Events: w.bus, Prices: guard.NewPrices(prices)})
	var specs []driver.Spec
	for _, a := range agents {
		m, err := scripted.New(a.model, config.Model{Model: a.model, Script: a.script, Loop: true})
		if err != nil {
			t.Fatal(err)
		}
		w.models[a.name] = m
		w.guard.AddAgent(a.name, a.model, a.limits)
		var llm model.LLM = m
		if a.switchable != nil {
			defs := maps.Clone(a.switchable)
			defs["main"] = config.Model{Provider: "scripted", Model: a.model, Script: a.script, Loop: true}
			llm = models.NewSwitch("main", m, defs, func(key string, def config.Model) (model.LLM, error) { return scripted.New(key, def) }, models.Env{})
		}
		specs = append(specs, driver.Spec{Name: a.name, Model: llm, Tools: []string{"report_done"}, HistoryTurns: 5, Schedules: a.schedules, Memory: a.memory})
	}
	var err error
	w.driver, err = driver.New(driver.Deps{Clock: c, Store: st, Events: w.bus, Log: log, Scheduler: w.sched, Guards: []hook.Guard{w.guard}}, specs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := w.driver.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.driver.Shutdown(context.Background())
		cancel()
	})

	if o.Tokens == nil {
		o.Tokens = tokens
	}
	o.Driver, o.Guard, o.Scheduler, o.Events = w.driver, w.guard, w.sched, w.bus
	if o.Clock == nil {
		o.Clock = c
	}
	if o.Log == nil {
		o.Log = log
	}
	w.srv, err = api.New(o)
	if err != nil {
		t.Fatal(err)
	}
	w.ts = httptest.NewServer(w.srv.Handler())
	t.Cleanup(func() {
		_ = w.srv.Shutdown(context.Background()) // ends open event streams
		w.ts.Close()
	})
	return w
}

func (w *world) agent(name string) *driver.Agent {
	w.t.Helper()
	a, err := w.driver.Agent(name)
	if err != nil {
		w.t.Fatal(err)
	}
	return a
}

// reply is one HTTP answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer is not a JSON object: %v\n%s", err, r.body)
	}
	return m
}

// errorText returns the answer's "error", failing unless the answer is
// a JSON error.
func (r reply) errorText(t *testing.T) string {
	t.Helper()
	m := r.json(t)
	e, ok := m["error"].(string)
	if !ok || e == "" {
		t.Fatalf("answer %d has no \"error\": %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error answer has Content-Type %q", ct)
	}
	return e
}

// call sends a request. contentType "" sends none; token "" sends no
// Authorization.
func (w *world) call(method, path, token, contentType, body string) reply {
	w.t.Helper()
	header := map[string]string{}
	if contentType != "" {
		header["Content-Type"] = contentType
	}
	if token != "" {
		header["Authorization"] = "Bearer " + token
	}
	return w.request(method, path, header, body)
}

// request sends a request with any headers; the header "Host" sets the
// request's Host (what the client says it addressed). body "" sends none.
func (w *world) request(method, path string, header map[string]string, body string) reply {
	w.t.Helper()
	return w.requestWith(w.ts.Client(), method, path, header, body)
}

// requestWith is request sent by client (clientFrom: another address).
func (w *world) requestWith(client *http.Client, method, path string, header map[string]string, body string) reply {
	w.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	// A stream answered where an error was expected must not hang the test.
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, w.ts.URL+path, rd)
	if err != nil {
		w.t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

func (w *world) get(path string) reply { return w.call(http.MethodGet, path, readToken, "", "") }

func (w *world) post(path, body string) reply {
	ct := ""
	if body != "" {
		ct = "application/json"
	}
	return w.call(http.MethodPost, path, operateToken, ct, body)
}

func (w *world) wantStatus(r reply, want int) {
	w.t.Helper()
	if r.status != want {
		w.t.Fatalf("status %d, want %d: %s", r.status, want, r.body)
	}
}

// waitEvent waits for the next event of typ for agent.
func (w *world) waitEvent(agent, typ string) events.Event {
	w.t.Helper()
	return wait.Event(w.t, deadline, w.sub, "a "+typ+" event for "+agent, func(e events.Event) bool { return e.Agent == agent && e.Type == typ })
}

// frame is one Server-Sent Events frame: an event, or a comment.
type frame struct {
	id, event, data string
	comment         string
}

// stream is an open event stream, read on its own goroutine.
type stream struct {
	t      *testing.T
	status int
	header http.Header
	frames chan frame
	cancel context.CancelFunc
}

// openStream opens an event stream with the given extra headers.
func (w *world) openStream(path string, header map[string]string) *stream {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.ts.URL+path, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+readToken)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := w.ts.Client().Do(req)
	if err != nil {
		cancel()
		w.t.Fatal(err)
	}
	s := &stream{t: w.t, status: resp.StatusCode, header: resp.Header, frames: make(chan frame, 1000), cancel: cancel}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(s.frames)
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		var f frame
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "":
				if f != (frame{}) {
					s.frames <- f
				}
				f = frame{}
			case strings.HasPrefix(line, ":"):
				f.comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "id: "):
				f.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				f.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				f.data = line[6:]
			}
		}
	}()
	w.t.Cleanup(func() { cancel(); <-done })
	return s
}

// next returns the next frame that is not a comment.
func (s *stream) next() frame {
	s.t.Helper()
	timeout := time.After(deadline)
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				s.t.Fatal("event stream ended")
			}
			if f.comment == "" {
				return f
			}
		case <-timeout:
			s.t.Fatal("no event on the stream")
		}
	}
}

// event decodes a frame's data.
func (f frame) eventData(t *testing.T) events.Event {
	t.Helper()
	var e events.Event
	if err := json.Unmarshal([]byte(f.data), &e); err != nil {
		t.Fatalf("event data %q: %v", f.data, err)
	}
	return e
}

func decode(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
}

// waitTurnDone waits until agent's latest turn is recorded and it no
// longer runs: the turn-completed event comes a moment before that.
func (w *world) waitTurnDone(agent string) {
	w.t.Helper()
	a := w.agent(agent)
	wait.For(w.t, agent+"'s turn recorded", func() bool {
		st := a.Status()
		return st.State != driver.Running && st.LastTurn != nil && st.LastTurn.N == st.Turns
	})
}
