package config

import (
	"strings"
	"time"
)

// Default returns the configuration `agent-worker run` uses without
// --config: one agent, demo, on the built-in scripted demo behaviour, with
// every default applied. It needs no network, no API key and no
// environment. Each call returns a fresh Config the caller may change.
func Default() *Config {
	c := &Config{
		Models: map[string]Model{
			"demo": {Provider: "scripted", Behaviour: "demo"},
		},
		Agents: []Agent{{
			Name:  "demo",
			Model: "demo",
			Instruction: "You are the demo agent of agent-worker, running on a scripted model " +
				"with no real LLM behind it. Acknowledge each message you receive, then " +
				"schedule your next turn or report that you are done.",
			Tools: []string{"schedule_next_turn", "report_done"},
			// The demo asks for a wake in 5 minutes; max 20s clamps it, so
			// `make run` shows a turn every 20 seconds and the clamp note.
			Sleep: Sleep{
				Min: Duration(5 * time.Second),
				Max: Duration(20 * time.Second),
			},
			WakeOnStart: true,
			// A short window, so the demo's running memory (folded by
			// the scripted model's summariser) shows within a minute.
			Turn: Turn{HistoryTurns: 3},
		}},
	}
	applyDefaults(c)
	return c
}

// Environment variables that DefaultFromEnv reads.
const (
	// EnvAPIToken, when set, makes the embedded default serve the operator
	// API on ContainerAPIListen with one operate token whose value is this
	// variable's.
	EnvAPIToken = "AGENT_WORKER_API_TOKEN"
	// EnvDataDir sets the embedded default's data_dir (default "./data").
	EnvDataDir = "AGENT_WORKER_DATA_DIR"
)

// ContainerAPIListen is where the embedded default serves the operator API
// when EnvAPIToken is set: every interface, as a container's port mapping
// needs.
const ContainerAPIListen = "0.0.0.0:8080"

// EnvTokenName is the name of the operate token DefaultFromEnv adds.
const EnvTokenName = "operator"

// DefaultFromEnv returns Default adjusted by the environment, read through
// lookup (os.LookupEnv in the command, a map in tests), so that `docker run
// IMAGE` with no config is usable from outside the container:
//
//   - EnvDataDir, when set and not empty, is the data_dir.
//   - EnvAPIToken, when set and not blank, moves api.listen to
//     ContainerAPIListen and adds the token {name: operator, role: operate,
//     value_env: AGENT_WORKER_API_TOKEN}; the worker reads the value from
//     the variable at start, as for any value_env. Without it the API stays
//     on 127.0.0.1:8080 with no token.
//
// It never reads the environment itself, and leaves a config file's values
// alone: it is for `run` without --config only.
func DefaultFromEnv(lookup func(string) (string, bool)) *Config {
	c := Default()
	if v, ok := lookup(EnvDataDir); ok && v != "" {
		c.DataDir = v
	}
	if v, ok := lookup(EnvAPIToken); ok && strings.TrimSpace(v) != "" {
		c.API.Listen = ContainerAPIListen
		c.API.Tokens = []Token{{Name: EnvTokenName, Role: "operate", ValueEnv: EnvAPIToken}}
	}
	return c
}
