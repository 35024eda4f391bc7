package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startTimeout bounds how long a process may take to become ready.
const startTimeout = 30 * time.Second

// service is one long-running child of a scenario — a worker replica,
// nats-server or redis-server — that can be killed and started again with
// the same arguments, its output appended to the same files.
type service struct {
	name   string
	argv   []string
	out    string // stdout file
	log    string // stderr file: the JSON log of a worker
	ready  func(ctx context.Context) error
	api    string // workers: http://127.0.0.1:PORT
	p      *proc
	starts []time.Time // when each start was issued
	// readyWithin bounds the wait for ready (default startTimeout).
	readyWithin time.Duration
}

// running reports whether the service's process is alive.
func (s *service) running() bool { return s.p != nil && !s.p.exited() }

// start starts the service and waits until it is ready or has exited.
func (s *service) start(ctx context.Context, r *reaper) error {
	if err := ensureNewline(s.log); err != nil {
		return err
	}
	p, err := r.start(s.name, s.out, s.log, s.argv)
	if err != nil {
		return err
	}
	s.p = p
	s.starts = append(s.starts, time.Now())
	within := startTimeout
	if s.readyWithin > 0 {
		within = s.readyWithin
	}
	err = poll(ctx, within, 50*time.Millisecond, s.name+" to be ready", func() (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("%s exited during start-up (%v):\n%s", s.name, p.err, tailOf(s.log, 15))
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return s.ready(rctx) == nil, nil
	})
	if err != nil {
		_ = p.kill()
	}
	return err
}

// kill ends the service with SIGKILL.
func (s *service) kill() error {
	if !s.running() {
		return nil
	}
	return s.p.kill()
}

// stop ends the service with SIGTERM, allowing grace.
func (s *service) stop(grace time.Duration) error {
	if !s.running() {
		return nil
	}
	return s.p.stop(grace)
}

// workerConf is what differs between the workers' configs.
type workerConf struct {
	dataDir    string
	natsListen string // embedded server's address, or
	natsURL    string // an external server
	storeURL   string // "" for nats://
	apiListen  string
	holder     string
	// heartbeat is lease.heartbeat, how often the replica announces
	// itself to the others; 0 leaves the worker's default.
	heartbeat   time.Duration
	agents      []string
	script      string // the model's script: YAML list items, indented 6
	wakeOnStart bool
	// extra holds more YAML keys for an agent, by name, indented 4.
	extra map[string]string
	// unthrottled lifts the agents' turn rate limits, so that a fault
	// scenario's recovery time measures the fault, not the throttle.
	unthrottled bool
	// model, when set, is the model "fake"'s YAML keys (indented 4)
	// instead of the scripted model with script; tools are the agents'
	// tools (default schedule_next_turn).
	model string
	tools []string
	// top holds more top-level YAML keys (pricing:, memory:, ...).
	top string
	// ackWait is nats.ack_wait (default 5s): since the input log it
	// bounds only subagent jobs, which a scenario shows by raising it.
	ackWait time.Duration
	// models holds more models' YAML (keys indented 2, under models:),
	// and agentModel names the model of an agent other than "fake".
	models     string
	agentModel map[string]string
	// ttl is lease.ttl (default 3s).
	ttl time.Duration
}

// The settings that lift the turn rate limits. limits is omitted for a
// binary whose validate does not know its keys yet.
const (
	unthrottledTurn   = "    turn: {max_per_wake: 1000}\n"
	unthrottledLimits = "    limits: {turns_per_hour: 1000000, turn_burst: 1000}\n"
)

// The scripted models of the scenarios.
const (
	// handledScript answers every turn after 200ms, so a kill often lands
	// mid-turn.
	handledScript = `
      - text: "handled"
        delay: 200ms
        usage: {input: 100, output: 10}`
	// rescheduleScript asks for the next turn at once, every turn: the
	// call, then (after the tool's answer) a text that ends the turn.
	rescheduleScript = `
      - call: {name: schedule_next_turn, args: {wake_in_seconds: 0}}
        usage: {input: 100, output: 10}
      - text: "rescheduled"
        usage: {input: 100, output: 10}`
)

// sealKeyFile is the seal key every replica of the run shares (written
// at start); "" leaves each replica its own.
var sealKeyFile string

// sealYAML is the config line that names sealKeyFile: a line of its own,
// which newWorker drops for a binary from before seal.key_file.
func sealYAML() string {
	if sealKeyFile == "" {
		return ""
	}
	return fmt.Sprintf("seal: {key_file: %q}\n", sealKeyFile)
}

// writeSealKey writes a new seal key (base64 of 32 random bytes) to
// path, mode 0600.
func writeSealKey(path string) error {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600)
}

// yaml renders the worker's config file.
func (c workerConf) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "data_dir: %q\nshutdown_grace: 5s\nlog: {format: json, level: info}\n", c.dataDir)
	b.WriteString(sealYAML())
	ackWait := c.ackWait
	if ackWait == 0 {
		ackWait = 5 * time.Second
	}
	if c.natsURL != "" {
		fmt.Fprintf(&b, "nats: {url: %q, ack_wait: %s, max_message_bytes: 65536}\n", c.natsURL, ackWait)
	} else {
		fmt.Fprintf(&b, "nats: {listen: %q, ack_wait: %s, max_message_bytes: 65536}\n", c.natsListen, ackWait)
	}
	if c.storeURL != "" {
		fmt.Fprintf(&b, "store: {url: %q}\n", c.storeURL)
	}
	fmt.Fprintf(&b, "api: {listen: %q}\n", c.apiListen)
	ttl := c.ttl
	if ttl == 0 {
		ttl = 3 * time.Second
	}
	if c.heartbeat > 0 {
		fmt.Fprintf(&b, "lease: {ttl: %s, heartbeat: %s, holder: %q}\n", ttl, c.heartbeat, c.holder)
	} else {
		fmt.Fprintf(&b, "lease: {ttl: %s, holder: %q}\n", ttl, c.holder)
	}
	b.WriteString(c.top)
	if c.model != "" {
		fmt.Fprintf(&b, "models:\n  fake:\n%s%sagents:\n", c.model, c.models)
	} else {
		fmt.Fprintf(&b, "models:\n  fake:\n    provider: scripted\n    script:%s\n    loop: true\n%sagents:\n", c.script, c.models)
	}
	tools := c.tools
	if len(tools) == 0 {
		tools = []string{"schedule_next_turn"}
	}
	for _, a := range c.agents {
		model := c.agentModel[a]
		if model == "" {
			model = "fake"
		}
		fmt.Fprintf(&b, "  - name: %s\n    model: %s\n    instruction: \"Chaos test agent: acknowledge the messages.\"\n    tools: [%s]\n    wake_on_start: %t\n", a, model, strings.Join(tools, ", "), c.wakeOnStart)
		if c.unthrottled {
			b.WriteString(unthrottledTurn + unthrottledLimits)
		}
		b.WriteString(c.extra[a])
	}
	return b.String()
}

// newWorker writes a worker replica's config under dir, checks it with
// `agent-worker validate`, and returns the (not yet started) replica.
func newWorker(bin, dir string, c workerConf) (*service, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	c.apiListen = "127.0.0.1:" + strconv.Itoa(port)
	if c.dataDir == "" {
		c.dataDir = filepath.Join(dir, "data")
	}
	cfg := filepath.Join(dir, "config.yaml")
	y := c.yaml()
	out, err := validate(bin, cfg, y)
	if err != nil && c.unthrottled && strings.Contains(string(out), "turns_per_hour") {
		// A binary from before limits.turns_per_hour.
		y = strings.ReplaceAll(y, unthrottledLimits, "")
		out, err = validate(bin, cfg, y)
	}
	if err != nil && sealYAML() != "" && strings.Contains(string(out), "seal") {
		// A binary from before seal.key_file (its key lives in the store).
		y = strings.ReplaceAll(y, sealYAML(), "")
		out, err = validate(bin, cfg, y)
	}
	if err != nil {
		return nil, fmt.Errorf("agent-worker validate rejected the harness's config (%v):\n%s\n%s", err, out, y)
	}
	s := &service{name: c.holder, argv: []string{bin, "run", "--config", cfg},
		out: filepath.Join(dir, "stdout.log"), log: filepath.Join(dir, "worker.log"), api: "http://" + c.apiListen}
	s.ready = func(ctx context.Context) error {
		code, _, err := apiCall(ctx, http.MethodGet, s.api+"/readyz")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("readyz: HTTP %d", code)
		}
		return err
	}
	return s, nil
}

// validate writes the config y to path and checks it with the binary.
func validate(bin, path, y string) ([]byte, error) {
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		return nil, err
	}
	return exec.Command(bin, "validate", "--config", path).CombinedOutput()
}

// newNATS returns an external nats-server with JetStream under dir.
func newNATS(bin, dir string) (*service, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	log := filepath.Join(dir, "nats-server.log")
	s := &service{name: "nats-server", out: log, log: log,
		argv: []string{bin, "-js", "-sd", filepath.Join(dir, "nats"), "-a", "127.0.0.1", "-p", strconv.Itoa(port)}}
	s.ready = func(ctx context.Context) error {
		nc, err := nats.Connect(url, nats.Timeout(time.Second), nats.NoReconnect())
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		_, err = js.AccountInfo(ctx)
		return err
	}
	return s, url, nil
}

// newRedis returns a redis-server under dir that keeps its data across a
// restart (append-only file, fsync always).
func newRedis(bin, dir string) (*service, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	data := filepath.Join(dir, "redis")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, "", err
	}
	log := filepath.Join(dir, "redis-server.log")
	s := &service{name: "redis-server", out: log, log: log,
		argv: []string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "yes", "--appendfsync", "always", "--dir", data}}
	s.ready = func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err
		}
		if !strings.HasPrefix(line, "+PONG") {
			return fmt.Errorf("redis answered %q", strings.TrimSpace(line))
		}
		return nil
	}
	return s, "redis://" + addr + "/0", nil
}

// httpClient talks to the workers' APIs on loopback only, never through a
// proxy. It keeps enough idle connections for the many requests in
// flight at once while a scenario watches who owns its agents.
var httpClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}}

// apiCall sends a request without a body and returns the status and body.
func apiCall(ctx context.Context, method, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

// agentStatus is the part of GET /v1/agents/{name} the harness reads.
// Every replica answers with the owner's view; Owner names the lease
// holder that built it.
type agentStatus struct {
	Owner           string `json:"owner"`
	State           string `json:"state"`
	HaltReason      string `json:"halt_reason"`
	Turns           int    `json:"turns"`
	Paused          bool   `json:"paused"`
	InboxPending    int    `json:"inbox_pending"`
	DeferredPending int    `json:"deferred_pending"`
}

// status reads one agent's status from the worker's API.
func (s *service) status(ctx context.Context, agent string) (agentStatus, error) {
	var st agentStatus
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	code, body, err := apiCall(ctx, http.MethodGet, s.api+"/v1/agents/"+agent)
	if err != nil {
		return st, err
	}
	if code != http.StatusOK {
		return st, fmt.Errorf("GET /v1/agents/%s: HTTP %d: %s", agent, code, bytes.TrimSpace(body))
	}
	return st, json.Unmarshal(body, &st)
}

// metrics scrapes the worker's /metrics: each series (name and labels as
// written, e.g. agent_worker_agent_owned{agent="a1"}) to its value.
func (s *service) metrics(ctx context.Context) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Not apiCall: with thousands of agents a scrape is megabytes.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.api+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := postClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	code := resp.StatusCode
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics of %s: HTTP %d", s.name, code)
	}
	m := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		i := strings.LastIndexByte(line, ' ')
		if line == "" || line[0] == '#' || i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m, nil
}

// verb posts an operator verb (pause, resume) for agent.
func (s *service) verb(ctx context.Context, agent, verb string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	code, body, err := apiCall(ctx, http.MethodPost, s.api+"/v1/agents/"+agent+"/"+verb)
	if err == nil && code >= 300 {
		err = fmt.Errorf("POST /v1/agents/%s/%s: HTTP %d: %s", agent, verb, code, bytes.TrimSpace(body))
	}
	return err
}

// tailOf returns the last n lines of the file at path.
func tailOf(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// embeddedWorker starts worker r1 with c and an embedded NATS server of
// its own on a free port (c.natsListen), and connects the publisher to
// it.
func (e *env) embeddedWorker(c workerConf) (*service, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	c.natsListen = addr
	return e.startWorker(c, "nats://"+addr)
}

// startWorker starts worker r1 with c and connects the publisher to the
// NATS server at url.
func (e *env) startWorker(c workerConf, url string) (*service, error) {
	w, err := e.worker("r1", c)
	if err != nil {
		return nil, err
	}
	if err := e.start(w); err != nil {
		return nil, err
	}
	if err := e.connect(url); err != nil {
		return nil, err
	}
	return w, nil
}
