package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/worker"
)

func runCmd(stdout, stderr io.Writer) *cobra.Command {
	var file, dataDir, listen, apiListen string
	c := &cobra.Command{
		Use:   "run [--config FILE]",
		Short: "Run the worker; without --config, the embedded demo.",
		Long: `Run the worker; without --config, the embedded demo.

Signals:
  SIGINT, SIGTERM  shut down gracefully: no new turns, running turns get
                   shutdown_grace to finish; a second signal stops at once.
  SIGHUP           re-read the operator API's token values (api.tokens
                   value_file, value_env) and swap them in without a
                   restart: the old values get 401 from then on. Names,
                   roles and agents stay as the config said at start (the
                   config file is not re-read). The log says "api tokens
                   reloaded" with the count, or "api tokens not reloaded"
                   with the error, and then the old tokens stay in force.
                   Replace a value file by renaming a complete file into
                   place, then: kill -HUP <pid>`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(file)
			if err != nil {
				return err
			}
			if dataDir != "" {
				cfg.DataDir = dataDir
			}
			if listen != "" {
				cfg.NATS.Listen = listen
			}
			if apiListen != "" {
				cfg.API.Listen = apiListen
			}
			// SIGHUP reloads the API tokens. It is caught from before the
			// worker starts until run returns, so it never ends the process
			// (its default action) while run runs.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			// After the first signal, stop() restores the default
			// handling, so a second Ctrl-C ends the process at once.
			return serveReloading(ctx, stop, hup, cfg, stdout, stderr)
		},
	}
	c.Flags().StringVarP(&file, "config", "c", "", "config file (default: the embedded demo)")
	c.Flags().StringVar(&dataDir, "data-dir", "", "override data_dir")
	c.Flags().StringVar(&listen, "nats-listen", "", "override nats.listen (host:port, or -1 for a random port)")
	c.Flags().StringVar(&apiListen, "api-listen", "", "override api.listen (host:port; port 0 picks a free one)")
	return c
}

// serve runs the worker until ctx ends, then shuts down gracefully: no new
// turns, running turns get cfg.ShutdownGrace to finish, then are
// cancelled. onStopping is called when shutdown begins. It never reloads
// the API tokens; run uses serveReloading.
func serve(ctx context.Context, onStopping func(), cfg *config.Config, stdout, stderr io.Writer) error {
	return serveReloading(ctx, onStopping, nil, cfg, stdout, stderr)
}

// serveReloading is serve that also reloads the API tokens
// (worker.ReloadTokens) on each value from reload — SIGHUP, in run — and
// logs the outcome: "api tokens reloaded" with the count, or "api tokens
// not reloaded" with the error, the old tokens staying in force; never a
// token's value. A nil reload never fires.
func serveReloading(ctx context.Context, onStopping func(), reload <-chan os.Signal, cfg *config.Config, stdout, stderr io.Writer) error {
	log := newLogger(cfg.Log, stderr)
	w, err := worker.Start(ctx, cfg, worker.Options{Log: log})
	if err != nil {
		if errors.Is(err, worker.ErrConfig) {
			return configError{err}
		}
		return err
	}
	names := make([]string, 0, len(cfg.Agents))
	for _, a := range cfg.Agents {
		names = append(names, a.Name)
	}
	source := cfg.File
	if source == "" {
		source = "the embedded default (no --config)"
	}
	nc := w.NATS()
	where := "external"
	if nc.Embedded {
		where = "embedded"
	}
	fmt.Fprintf(stdout, "agent-worker %s running %d agent(s) [%s] from %s\n", version, len(names), strings.Join(names, ", "), source)
	fmt.Fprintf(stdout, "NATS (%s): %s · state store: %s\n", where, nc.ClientURL, worker.Redact(cfg.Store.URL))
	fmt.Fprintf(stdout, "send a message:  agent-worker send %s \"disk full on db-1\" --nats %s\n", names[0], nc.ClientURL)
	fmt.Fprintf(stdout, "operator API:    http://%s (status page at /, metrics at /metrics)\n", w.APIAddr())
	fmt.Fprintf(stdout, "watch events:    nats sub '%s.*.events.>' -s %s\n", cfg.NATS.SubjectPrefix, nc.ClientURL)
	fmt.Fprintf(stdout, "stop with Ctrl-C (a second Ctrl-C stops at once); reload the API tokens with SIGHUP\n")
	log.Info("worker started", "agents", len(names), "nats", nc.ClientURL, "store", worker.Redact(cfg.Store.URL), "config", source)

	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case sig := <-reload:
			if err := w.ReloadTokens(); err != nil {
				log.Error("api tokens not reloaded; the old tokens stay in force", "signal", fmt.Sprint(sig), "error", err)
				continue
			}
			log.Info("api tokens reloaded", "signal", fmt.Sprint(sig), "tokens", len(cfg.API.Tokens))
		}
	}
	if onStopping != nil {
		onStopping()
	}
	log.Info("shutting down: no new turns; running turns may finish", "grace", cfg.ShutdownGrace.D())
	grace, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace.D())
	defer cancel()
	w.Stop(grace)
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
