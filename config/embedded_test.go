package config

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestDefaultValidates(t *testing.T) {
	t.Parallel()
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default() does not validate:\n%v", err)
	}
	a, ok := c.Agent("demo")
	if !ok {
		t.Fatal("no demo agent")
	}
	if m := c.Models[a.Model]; m.Provider != "scripted" || m.Behaviour != "demo" || m.Model != "demo" {
		t.Errorf("demo model = %+v", m)
	}
	if !slices.Equal(a.Tools, []string{"schedule_next_turn", "report_done"}) {
		t.Errorf("tools = %v", a.Tools)
	}
	if a.Sleep != (Sleep{Min: Duration(5 * time.Second), Max: Duration(20 * time.Second)}) {
		t.Errorf("sleep = %+v", a.Sleep)
	}
	if !a.WakeOnStart {
		t.Error("the demo agent does not wake on start: make run would show no turn")
	}
	if a.Instruction == "" || a.Inbox.Cap != 256 || a.Watchdog.Mode != "enforce" {
		t.Errorf("defaults not applied to the demo agent: %+v", a)
	}
	if c.Store.URL != "nats://" || c.File != "" {
		t.Errorf("store %q file %q", c.Store.URL, c.File)
	}
}

func TestDefaultIsFresh(t *testing.T) {
	t.Parallel()
	a := Default()
	a.Agents[0].Tools[0] = "changed"
	a.Models["demo"] = Model{}
	b := Default()
	if b.Agents[0].Tools[0] != "schedule_next_turn" || b.Models["demo"].Provider != "scripted" {
		t.Error("Default() shares state between calls")
	}
}

// TestDefaultFromEnv is `docker run IMAGE` with no config: with
// AGENT_WORKER_API_TOKEN the API moves to 0.0.0.0:8080 behind an operate
// token read from that variable (and validates: an open listener needs a
// token); without it (or blank) it stays on loopback with no token, as
// Default. AGENT_WORKER_DATA_DIR sets data_dir.
func TestDefaultFromEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		env     map[string]string
		listen  string
		tokens  []Token
		dataDir string
	}{
		{"nothing set", nil, "127.0.0.1:8080", nil, "./data"},
		{"blank token", map[string]string{EnvAPIToken: "  "}, "127.0.0.1:8080", nil, "./data"},
		{"empty data dir", map[string]string{EnvDataDir: ""}, "127.0.0.1:8080", nil, "./data"},
		{"token and data dir", map[string]string{EnvAPIToken: "s3cret", EnvDataDir: "/data"}, "0.0.0.0:8080",
			[]Token{{Name: "operator", Role: "operate", ValueEnv: "AGENT_WORKER_API_TOKEN"}}, "/data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := DefaultFromEnv(envMap(tc.env))
			if c.API.Listen != tc.listen || !reflect.DeepEqual(c.API.Tokens, tc.tokens) || c.DataDir != tc.dataDir {
				t.Fatalf("listen %q tokens %+v data_dir %q; want %q %+v %q", c.API.Listen, c.API.Tokens, c.DataDir, tc.listen, tc.tokens, tc.dataDir)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("does not validate:\n%v", err)
			}
			for _, tok := range c.API.Tokens {
				if tok.ValueEnv != EnvAPIToken || tok.ValueFile != "" {
					t.Fatalf("token %+v: its value must come from %s", tok, EnvAPIToken)
				}
			}
		})
	}
}
