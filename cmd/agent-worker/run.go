package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/models"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memory"
	"github.com/agent-worker/agent-worker/tools"
)

func runCmd(stdout, stderr io.Writer) *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   "run [--config FILE]",
		Short: "Run the worker; without --config, the embedded demo.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(file)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			// After the first signal, stop() restores the default
			// handling, so a second Ctrl-C ends the process at once.
			return serve(ctx, stop, cfg, stdout, stderr)
		},
	}
	c.Flags().StringVarP(&file, "config", "c", "", "config file (default: the embedded demo)")
	return c
}

// serve runs the worker until ctx ends, then shuts down gracefully: no new
// turns, running turns get cfg.ShutdownGrace to finish, then are
// cancelled. onStopping is called when shutdown begins.
func serve(ctx context.Context, onStopping func(), cfg *config.Config, stdout, stderr io.Writer) error {
	log := newLogger(cfg.Log, stderr)
	st, err := openStore(cfg.Store.URL, log)
	if err != nil {
		return configError{err}
	}
	defer st.Close()
	specs, err := buildSpecs(cfg)
	if err != nil {
		return configError{err}
	}
	bus := events.NewBus(0, log)
	d, err := driver.New(driver.Deps{Store: st, Log: log, Events: bus}, specs)
	if err != nil {
		return configError{err}
	}
	loops, cancelLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelLoops()
	d.Start(loops)

	names := make([]string, 0, len(cfg.Agents))
	for _, a := range cfg.Agents {
		names = append(names, a.Name)
	}
	source := cfg.File
	if source == "" {
		source = "the embedded default (no --config)"
	}
	fmt.Fprintf(stdout, "agent-worker %s running %d agent(s) [%s] from %s\n", version, len(names), strings.Join(names, ", "), source)
	fmt.Fprintf(stdout, "state store: %s\n", redact(cfg.Store.URL))
	fmt.Fprintf(stdout, "stop with Ctrl-C (a second Ctrl-C stops at once)\n")
	log.Info("worker started", "agents", len(names), "store", redact(cfg.Store.URL), "config", source)

	for _, a := range cfg.Agents {
		if a.WakeOnStart {
			ag, _ := d.Agent(a.Name)
			ag.Wake(driver.Cause{Source: driver.SourceStartup})
		}
	}

	<-ctx.Done()
	if onStopping != nil {
		onStopping()
	}
	log.Info("shutting down: no new turns; running turns may finish", "grace", cfg.ShutdownGrace.D())
	grace, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace.D())
	defer cancel()
	d.Shutdown(grace)
	log.Info("worker stopped")
	return nil
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// openStore opens the store the URL names.
func openStore(raw string, log *slog.Logger) (store.Store, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("store.url %q: %w", redact(raw), err)
	}
	switch u.Scheme {
	case "memory":
		log.Warn("state store is memory://: spend, halts, pauses and history do not survive a restart")
		return memory.New(nil), nil
	case "nats", "redis", "rediss":
		return nil, fmt.Errorf("store.url %q: the %s store is not in this build yet; set store.url: memory://", redact(raw), u.Scheme)
	}
	return nil, fmt.Errorf("store.url %q: unknown scheme %q (want nats, redis, rediss or memory)", redact(raw), u.Scheme)
}

// redact hides a password in a URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

// buildSpecs resolves each configured agent into what the driver runs,
// with its own model instance.
func buildSpecs(cfg *config.Config) ([]driver.Spec, error) {
	var specs []driver.Spec
	for _, a := range cfg.Agents {
		m, err := models.New(a.Model, cfg.Models[a.Model])
		if err != nil {
			return nil, fmt.Errorf("agent %q: %w", a.Name, err)
		}
		specs = append(specs, driver.Spec{
			Name:            a.Name,
			Instruction:     a.Instruction,
			Model:           m,
			Tools:           a.Tools,
			Sleep:           tools.Sleep{Min: a.Sleep.Min.D(), Max: a.Sleep.Max.D()},
			Heartbeat:       a.Sleep.Default.D(),
			InboxCap:        a.Inbox.Cap,
			TurnTimeout:     a.Turn.Timeout.D(),
			MaxTurnsPerWake: a.Turn.MaxPerWake,
			HistoryTurns:    a.Turn.HistoryTurns,
		})
	}
	return specs, nil
}
