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
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/worker"
)

// runCmd is `run`: the worker, from a config file or the embedded demo.
func (c *cli) runCmd() *cobra.Command {
	var file, dataDir, listen, apiListen string
	cmd := &cobra.Command{
		Use:   "run [--config FILE]",
		Short: "Run the worker; without --config, the embedded demo.",
		Long: `Run the worker; without --config, the embedded demo.

Without --config (as in a container: docker run IMAGE):
  AGENT_WORKER_API_TOKEN  serve the operator API on 0.0.0.0:8080 with this
                          operate token (without it: 127.0.0.1:8080, no
                          token, reachable only from this machine or
                          container)
  AGENT_WORKER_DATA_DIR   data_dir (default ./data)

Logging (every command): --log-format text|json and --log-level
debug|info|warn|error, else AGENT_WORKER_LOG_FORMAT and
AGENT_WORKER_LOG_LEVEL, else the config's log section, else text and info.
In json mode every line on stderr is a JSON record, the start-up banner
included.

Signals:
  SIGINT, SIGTERM  shut down gracefully: no new turns, running turns get
                   shutdown_grace to finish; a second signal stops at once.
  SIGHUP           reload the config without a restart (as POST
                   /v1/reload): re-read the config file (with these
                   flags' overrides), validate it, and apply it — agents
                   added, removed and changed (from their next turn),
                   models, and the operator API's tokens, whose values
                   are read again too (api.tokens value_file, value_env):
                   a replaced value gets 401 from then on. A file that is
                   invalid, or changes what needs a restart (listen
                   addresses, store, stream, data_dir, ...), is refused
                   whole with its file:line problems logged, and the
                   running config stays. The log says "config reloaded"
                   and "api tokens reloaded" with the count, or "api
                   tokens not reloaded" with the problems. Replace a
                   file by renaming a complete file into place, then:
                   kill -HUP <pid>

Exit codes: 0 stopped by a signal, cleanly; 1 failed while running;
2 bad flags or config; 3 cannot listen on api.listen or nats.listen (in
use, not this host's); 4 NATS or the store did not answer at start-up.`,
		Example: `  agent-worker run                           # the embedded demo
  agent-worker run --config worker.yaml
  agent-worker run -c worker.yaml --log-format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := c.runConfig(file, overrides{dataDir: dataDir, natsListen: listen, apiListen: apiListen})
			if err != nil {
				return err
			}
			opts := serveOptions{ownsProcess: c.env.ownsProcess}
			// Only the embedded default is run as `docker run IMAGE`; a
			// config file says where the API listens on purpose.
			opts.inContainer = file == "" && c.env.inContainer != nil && c.env.inContainer()
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
			opts.onStopping, opts.reload = stop, hup
			// A reload reads the file again with the same overrides.
			o := overrides{dataDir: dataDir, natsListen: listen, apiListen: apiListen}
			opts.source = func() (*config.Config, error) { return c.runConfig(file, o) }
			return serveWith(ctx, cfg, c.stdout, c.stderr, opts)
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "config file (default: the embedded demo)")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "override data_dir")
	cmd.Flags().StringVar(&listen, "nats-listen", "", "override nats.listen (host:port, or -1 for a random port)")
	cmd.Flags().StringVar(&apiListen, "api-listen", "", "override api.listen (host:port; port 0 picks a free one)")
	return cmd
}

// overrides are run's flags that override the config.
type overrides struct{ dataDir, natsListen, apiListen string }

// runConfig is the config run serves: the file, or without one the
// embedded default adjusted by the environment (config.DefaultFromEnv);
// then the flags' overrides, and the log settings (logSettings: flag, env,
// file, default).
func (c *cli) runConfig(file string, o overrides) (*config.Config, error) {
	cfg, err := loadConfig(file, c.env)
	if err != nil {
		return nil, err
	}
	c.logFile = cfg.Log
	if cfg.Log, err = c.logSettings(); err != nil {
		return nil, configError{err}
	}
	if o.dataDir != "" {
		cfg.DataDir = o.dataDir
	}
	if o.natsListen != "" {
		cfg.NATS.Listen = o.natsListen
	}
	if o.apiListen != "" {
		cfg.API.Listen = o.apiListen
	}
	return cfg, nil
}

// serveOptions are serveWith's optional parts.
type serveOptions struct {
	// onStopping is called when shutdown begins.
	onStopping func()
	// reload fires a config reload (SIGHUP, in run); nil never fires.
	reload <-chan os.Signal
	// source re-reads the config for a reload; nil: the config served
	// (only the token values are then read again).
	source func() (*config.Config, error)
	// inContainer: warn when the API is reachable only from inside the
	// container (containerNotice).
	inContainer bool
	// ownsProcess routes slog's default logger and the standard log
	// package through the worker's logger (see environ.ownsProcess).
	ownsProcess bool
}

// serve runs the worker until ctx ends, then shuts down gracefully: no new
// turns, running turns get cfg.ShutdownGrace to finish, then are
// cancelled. onStopping is called when shutdown begins. It never reloads
// the API tokens; run uses serveWith with a reload channel.
func serve(ctx context.Context, onStopping func(), cfg *config.Config, stdout, stderr io.Writer) error {
	return serveWith(ctx, cfg, stdout, stderr, serveOptions{onStopping: onStopping})
}

// serveReloading is serve that also reloads the API tokens on each value
// from reload.
func serveReloading(ctx context.Context, onStopping func(), reload <-chan os.Signal, cfg *config.Config, stdout, stderr io.Writer) error {
	return serveWith(ctx, cfg, stdout, stderr, serveOptions{onStopping: onStopping, reload: reload})
}

// serveWith runs the worker until ctx ends, logging to stderr as cfg.Log
// says. It announces itself with the banner (banner.go), reloads the API
// tokens (worker.ReloadTokens) on each value from o.reload and logs the
// outcome: "api tokens reloaded" with the count, or "api tokens not
// reloaded" with the error, the old tokens staying in force; never a
// token's value.
func serveWith(ctx context.Context, cfg *config.Config, stdout, stderr io.Writer, o serveOptions) error {
	log := newLogger(cfg.Log, stderr)
	if o.ownsProcess {
		slog.SetDefault(log)
	}
	for _, w := range cfg.Warnings() {
		log.Warn(w.Msg, "key", w.Path, "file", w.File, "line", w.Line)
	}
	traces, err := startTracing(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer stopTracing(traces, log) // after Stop: the last turns' spans go out
	source := o.source
	if source == nil {
		source = func() (*config.Config, error) { return cfg, nil }
	}
	w, err := worker.Start(ctx, cfg, worker.Options{Log: log, Tracing: traces, Source: source})
	if err != nil {
		if errors.Is(err, worker.ErrConfig) {
			return configError{err}
		}
		return err
	}
	announce(newBanner(cfg, w), cfg.Log.Format == "json", stdout, log)
	if o.inContainer {
		if notice := containerNotice(cfg, w.APIAddr()); notice != "" {
			log.Warn(notice)
		}
	}

	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case sig := <-o.reload:
			reload(ctx, w, sig, log)
		}
	}
	if o.onStopping != nil {
		o.onStopping()
	}
	log.Info("shutting down: no new turns; running turns may finish", "grace", cfg.ShutdownGrace.D())
	grace, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace.D())
	defer cancel()
	w.Stop(grace)
	log.Info("worker stopped")
	return nil
}

// reload reloads the config on a signal (worker.ReloadConfig, which logs
// what changed or why it refused) and says what became of the tokens:
// "api tokens reloaded" with the count, or "api tokens not reloaded" with
// the problems, the old tokens staying in force; never a token's value.
// It waits at most reloadWait for the running turns of the agents it
// removes or changes.
func reload(ctx context.Context, w *worker.Worker, sig os.Signal, log *slog.Logger) {
	by := "signal " + signalName(sig)
	ctx, cancel := context.WithTimeout(ctx, reloadWait)
	defer cancel()
	_, err := w.ReloadConfig(ctx, by)
	var refusal *worker.ReloadRefusal
	if errors.As(err, &refusal) {
		log.Error("api tokens not reloaded; the old tokens stay in force", "signal", fmt.Sprint(sig),
			"error", strings.Join(refusal.Problems, "; "), "by", by)
		return
	}
	log.Info("api tokens reloaded", "signal", fmt.Sprint(sig), "tokens", len(w.Config().API.Tokens), "by", by)
}

// reloadWait bounds how long a signalled reload waits for running turns.
const reloadWait = 10 * time.Minute

// signalName names a signal as kill does: SIGHUP.
func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok && s == syscall.SIGHUP {
		return "SIGHUP"
	}
	return fmt.Sprint(sig)
}
