package worker

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// cutter is a TCP proxy to a NATS server that the test can cut (every
// connection closed, new ones refused) and mend (listening again on the
// same address): one replica losing NATS while the others keep it.
type cutter struct {
	t      *testing.T
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func newCutter(t *testing.T, target string) *cutter {
	t.Helper()
	c := &cutter{t: t, target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.addr = ln.Addr().String()
	c.serve(ln)
	t.Cleanup(c.cut)
	return c
}

func (c *cutter) serve(ln net.Listener) {
	c.mu.Lock()
	c.ln = ln
	c.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", c.target)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, in, out)
			c.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
}

// cut closes the listener and every connection through it.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ln != nil {
		c.ln.Close()
		c.ln = nil
	}
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

// mend listens on the same address again.
func (c *cutter) mend() {
	c.t.Helper()
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		c.t.Fatal(err)
	}
	c.serve(ln)
}

// TestAReplicaCutOffFromNATSSaysTheOwnerIsUnknown: r1 owns triage, r2
// owns local; r2 reaches NATS through a proxy that the test cuts. While
// r2 cannot reach NATS its API never names an owner nor shows a state it
// cannot know: GET of triage answers 503 with Retry-After and "owner …
// unknown right now: NATS reconnecting", the list shows triage as unknown
// with that reason and no counts, a verb is 503 and done nowhere. Once
// r2's lease on local has gone unconfirmed (TTL - renew interval) r2
// stops answering for local too and lists it as agents_unconfirmed, not
// as its own, while r1 takes local over and runs its turns. On the old
// code r2 waited out the forward timeout and answered "no replica owns
// agent" (a guess: r1 owned it all along), and went on showing its own,
// stale view of local. Once r2 is back it shows r1's views.
func TestAReplicaCutOffFromNATSSaysTheOwnerIsUnknown(t *testing.T) {
	t.Parallel()
	port, dir := freePort(t), t.TempDir()
	ns := runServer(t, port, dir)
	t.Cleanup(ns.Shutdown)
	proxy := newCutter(t, strings.TrimPrefix(ns.ClientURL(), "nats://"))
	c := &cluster{t: t, reps: map[string]*running{}, recs: map[string]*recorder{}}
	const local = "    tools: [schedule_next_turn, report_done]\n  - {name: local, model: fake, replica_affinity: r2, tools: [report_done]}\n"
	for h, url := range map[string]string{"r1": ns.ClientURL(), "r2": "nats://" + proxy.addr} {
		c.recs[h] = newRecorder()
		cfg := replicaConfig(t, h, url, "", local, "")
		cfg.Lease.TTL = config.Duration(6 * time.Second) // r2's leases are in doubt 4s after its last renewal
		c.reps[h] = start(t, cfg, c.recs[h], nil)
	}
	owner := func(h, agent string) string {
		code, body := c.call(h, http.MethodGet, "/v1/agents/"+agent, "")
		var v struct{ Owner string }
		if code != http.StatusOK || json.Unmarshal(body, &v) != nil {
			return ""
		}
		return v.Owner
	}
	wait.Within(t, deadline, "r1 owns triage, r2 local, each shown by both", func() bool {
		return owner("r2", "triage") == "r1" && owner("r1", "local") == "r2" && owner("r1", "triage") == "r1" && owner("r2", "local") == "r2"
	})

	proxy.cut()
	const unknown = `owner of agent "triage" unknown right now: NATS reconnecting`
	wait.Within(t, deadline, "r2 to notice it lost NATS", func() bool {
		code, body := c.call("r2", http.MethodGet, "/v1/agents/triage", "")
		if code == http.StatusOK {
			t.Fatalf("r2 answered a view it cannot have: %s", body)
		}
		return code == http.StatusServiceUnavailable && strings.Contains(errorOf(body), unknown)
	})
	req, err := http.NewRequest(http.MethodGet, "http://"+c.reps["r2"].w.APIAddr()+"/v1/agents/triage", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("GET on r2 cut off: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	code, body := c.call("r2", http.MethodGet, "/v1/agents", "")
	var list struct {
		Agents []map[string]any `json:"agents"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Agents) != 2 || list.Agents[0]["name"] != "triage" {
		t.Fatalf("list on r2 cut off: %d %s", code, body)
	}
	if v := list.Agents[0]; v["state"] != "unknown" || v["owner"] != nil || !strings.Contains(v["error"].(string), unknown) || v["turns"] != nil || v["paused"] != nil || v["inbox_pending"] != nil {
		t.Fatalf("list on r2 cut off shows %v", v)
	}
	if code, body := c.call("r2", http.MethodPost, "/v1/agents/triage/pause", ""); code != http.StatusServiceUnavailable || !strings.Contains(errorOf(body), unknown) {
		t.Fatalf("pause on r2 cut off: %d %s", code, body)
	}
	if v := c.view("r1"); v["owner"] != "r1" || v["paused"] == true {
		t.Fatalf("r1, which kept NATS: %v", v)
	}

	// r2's own agent: once its lease is in doubt, r2 no longer claims it;
	// its renewals fail while its NATS is down (lease.Options.Live), so
	// it lets the agent go at the lapse.
	wait.Within(t, deadline, "r2 to claim local no more", func() bool {
		code, body := c.call("r2", http.MethodGet, "/v1/replicas", "")
		var l struct {
			Replicas []struct {
				Self        bool
				Agents      []string
				Unconfirmed []string `json:"agents_unconfirmed"`
			}
		}
		if code != http.StatusOK || json.Unmarshal(body, &l) != nil || len(l.Replicas) == 0 || !l.Replicas[0].Self {
			t.Fatalf("replicas on r2: %d %s", code, body)
		}
		return len(l.Replicas[0].Agents) == 0 && len(l.Replicas[0].Unconfirmed) <= 1
	})
	code, body = c.call("r2", http.MethodGet, "/v1/agents/local", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(errorOf(body), `owner of agent "local" unknown right now`) {
		t.Fatalf("local on r2 with its lease in doubt: %d %s", code, body)
	}
	wait.Within(t, deadline, "r1 to take local over", func() bool { return owner("r1", "local") == "r1" })
	c.reps["r1"].publish("agents.local.inbox", "after the takeover")
	wait.Within(t, deadline, "local's turn on r1", func() bool {
		var v struct{ Turns int }
		code, body := c.call("r1", http.MethodGet, "/v1/agents/local", "")
		return code == http.StatusOK && json.Unmarshal(body, &v) == nil && v.Turns >= 1
	})
	if code, body := c.call("r2", http.MethodGet, "/v1/agents/local", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("r2, still cut off, answered for local after r1 took it: %d %s", code, body)
	}

	// Back, r2 shows r1's truth; local is handed back to r2 (its
	// affinity), which goes on from r1's turn count, not its own.
	proxy.mend()
	wait.Within(t, deadline, "r2 back, both replicas showing one owner of each agent", func() bool {
		lo := owner("r1", "local")
		return owner("r2", "triage") == "r1" && lo != "" && owner("r2", "local") == lo
	})
	wait.Within(t, deadline, "r2's view of local to count r1's turn", func() bool {
		var v struct{ Turns int }
		code, body := c.call("r2", http.MethodGet, "/v1/agents/local", "")
		return code == http.StatusOK && json.Unmarshal(body, &v) == nil && v.Turns >= 1
	})
}

// errorOf is the "error" of an API answer's JSON body.
func errorOf(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error
}
