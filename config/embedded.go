package config

import "time"

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
		}},
	}
	applyDefaults(c)
	return c
}
