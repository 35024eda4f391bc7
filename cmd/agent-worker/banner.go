package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/worker"
)

// banner is what a started worker tells its operator: what runs, from
// where, and how to reach it.
type banner struct {
	version    string
	agents     []string
	source     string // the config file, or the embedded default
	natsServer string // "embedded" or "external"
	natsURL    string
	store      string // redacted
	api        string // the operator API's URL
	prefix     string // the NATS subject prefix
}

// newBanner gathers the banner's facts from a started worker.
func newBanner(cfg *config.Config, w *worker.Worker) banner {
	b := banner{version: version, source: cfg.File, natsServer: "external", store: worker.Redact(cfg.Store.URL),
		api: "http://" + w.APIAddr(), prefix: cfg.NATS.SubjectPrefix}
	for _, a := range cfg.Agents {
		b.agents = append(b.agents, a.Name)
	}
	if b.source == "" {
		b.source = "the embedded default (no --config)"
	}
	nc := w.NATS()
	b.natsURL = nc.ClientURL
	if nc.Embedded {
		b.natsServer = "embedded"
	}
	return b
}

// sendHint is a command line that sends the first agent a message.
func (b banner) sendHint() string {
	return fmt.Sprintf("agent-worker send %s \"disk full on db-1\" --nats %s", b.agents[0], b.natsURL)
}

// eventsHint is a command line that watches the agents' events.
func (b banner) eventsHint() string {
	return fmt.Sprintf("nats sub '%s.*.events.>' -s %s", b.prefix, b.natsURL)
}

const signalsHint = "stop with Ctrl-C (a second Ctrl-C stops at once); reload the config with SIGHUP"

// announce tells the operator the worker runs. In text mode the banner's
// lines go to stdout, for a person, and a "worker started" record to the
// log; in JSON mode the one "worker started" record carries every fact of
// the banner as attributes, so stderr holds nothing but JSON.
func announce(b banner, jsonMode bool, stdout io.Writer, log *slog.Logger) {
	if jsonMode {
		log.Info("worker started", "version", b.version, "agents", len(b.agents), "agent_names", b.agents,
			"config", b.source, "nats_server", b.natsServer, "nats", b.natsURL, "store", b.store,
			"api", b.api, "status_page", b.api+"/", "metrics", b.api+"/metrics",
			"send", b.sendHint(), "events", b.eventsHint(), "signals", signalsHint)
		return
	}
	fmt.Fprintf(stdout, "agent-worker %s running %d agent(s) [%s] from %s\n", b.version, len(b.agents), strings.Join(b.agents, ", "), b.source)
	fmt.Fprintf(stdout, "NATS (%s): %s · state store: %s\n", b.natsServer, b.natsURL, b.store)
	fmt.Fprintf(stdout, "send a message:  %s\n", b.sendHint())
	fmt.Fprintf(stdout, "operator API:    %s (status page at /, metrics at /metrics)\n", b.api)
	fmt.Fprintf(stdout, "watch events:    %s\n", b.eventsHint())
	fmt.Fprintln(stdout, signalsHint)
	log.Info("worker started", "agents", len(b.agents), "nats", b.natsURL, "store", b.store, "config", b.source)
}
