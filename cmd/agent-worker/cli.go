package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/money"
	"github.com/agent-worker/agent-worker/worker"
)

// Exit codes: one per class of start-up failure (worker.ErrConfig,
// ErrListen, ErrUnreachable), documented in docs/operations.md.
const (
	exitOK          = 0
	exitFailed      = 1 // the worker failed while running, or a check failed
	exitConfig      = 2 // bad flags, arguments or config: fix and retry
	exitListen      = 3 // an address to listen on is taken or not this host's: free it or change it
	exitUnreachable = 4 // NATS or the store did not answer at start-up: start again once it is up
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// configError marks errors that are the user's input, for exit code 2.
type configError struct{ err error }

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }

// errUsage marks a command line that cannot be run as written (an unknown
// command or flag, a wrong number of arguments, a missing flag), for exit
// code 2.
var errUsage = errors.New("usage")

// usageError wraps err as a usage error naming cmd's help.
func usageError(cmd *cobra.Command, err error) error {
	return fmt.Errorf("%w: %w (see %s --help)", errUsage, err, cmd.CommandPath())
}

// exitError ends the command with code and prints nothing more: the
// command has said what there is to say (health's "not ready: ...").
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// environ is the process environment as the commands see it. execute uses
// the real one; tests pass their own, so they can run in parallel.
type environ struct {
	// lookup reads an environment variable (os.LookupEnv).
	lookup func(string) (string, bool)
	// inContainer reports whether the process runs in a container.
	inContainer func() bool
	// ownsProcess lets run change process-wide state: it routes the
	// standard log package (which some libraries write to) and slog's
	// default logger through the worker's logger, so that JSON mode stays
	// JSON. False in tests, which share one process.
	ownsProcess bool
}

// processEnviron is the real environment; main also sets ownsProcess.
func processEnviron() environ {
	return environ{lookup: os.LookupEnv, inContainer: inContainer}
}

// get returns the variable's value, "" when unset.
func (e environ) get(name string) string {
	v, _ := e.lookup(name)
	return v
}

// cli is one invocation: where it writes, what environment it reads, and
// the log settings in force.
type cli struct {
	stdout, stderr io.Writer
	env            environ
	// logFlags are the persistent --log-format and --log-level values.
	logFlags config.Log
	// logFile is the config file's log section once run has read it.
	logFile config.Log
}

// execute runs the command line args in the process environment and
// returns the process exit code.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return executeIn(ctx, processEnviron(), args, stdout, stderr)
}

// executeIn runs the command line args in env and returns the exit code:
// 0 on success; 2 for an unknown command or flag, a wrong number of
// arguments or a bad config; 3 when the worker cannot listen on an
// address; 4 when NATS or the store did not answer at start-up; 1 for
// anything else. A failure is printed
// on stderr, as a JSON log record in JSON log mode.
func executeIn(ctx context.Context, env environ, args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr, env: env}
	root := c.rootCmd()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	code := exitFailed
	var ce configError
	var ee exitError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ce), errors.Is(err, errUsage):
		code = exitConfig
	case errors.Is(err, worker.ErrListen):
		code = exitListen
	case errors.Is(err, worker.ErrUnreachable):
		code = exitUnreachable
	}
	c.reportFailure(cmd, err, code)
	return code
}

// rootCmd builds the command tree.
func (c *cli) rootCmd() *cobra.Command {
	var showVersion bool
	root := &cobra.Command{
		Use:   "agent-worker",
		Short: "Run LLM agents unattended: sleep, wake, one turn, sleep again.",
		Example: `  agent-worker run --config worker.yaml
  agent-worker status
  agent-worker send oncall "disk 91% on db-2"`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if showVersion {
				fmt.Fprintln(c.stdout, versionLine())
				return nil
			}
			return cmd.Help()
		},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			// Settle the log settings before any command runs, so a bad
			// --log-format or AGENT_WORKER_LOG_LEVEL stops every command.
			if _, err := c.logSettings(); err != nil {
				return usageError(cmd, err)
			}
			return nil
		},
	}
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.Flags().BoolVar(&showVersion, "version", false, "print the version (as the version command)")
	c.addLogFlags(root)
	root.AddCommand(c.runCmd(), c.validateCmd(), c.versionCmd(), c.sendCmd(), c.healthCmd(), c.statusCmd())
	root.AddCommand(c.opsCmds()...)
	root.AddCommand(c.approvalCmds()...)
	root.AddCommand(c.scheduleCmd())
	root.AddCommand(c.dlqCmd())
	root.AddCommand(c.modelsCmd())
	root.AddCommand(c.modelCmd())
	root.AddCommand(c.steerCmd())
	root.AddCommand(c.askCmd())
	root.AddCommand(c.mcpCmd())
	root.SetFlagErrorFunc(usageError)
	wrapArgs(root)
	return root
}

// unknownSubcommand is the Args of a command that only groups others: any
// argument names a command that does not exist.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // as cobra's own suggestions
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return errors.New(msg)
}

// wrapArgs makes every argument-count error of c and its subcommands a
// usage error (exit 2).
func wrapArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError(cmd, err)
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

// loadConfig reads the config file, or returns the embedded default
// adjusted by env (config.DefaultFromEnv) when path is "".
func loadConfig(path string, env environ) (*config.Config, error) {
	if path == "" {
		return config.DefaultFromEnv(env.lookup), nil
	}
	c, err := config.Load(path)
	if err != nil {
		return nil, configError{err}
	}
	return c, nil
}

func (c *cli) validateCmd() *cobra.Command {
	var file string
	var strict bool
	cmd := &cobra.Command{
		Use:   "validate --config FILE [--strict]",
		Short: "Check a config file; print file:line: message for every problem, and file:line: warning: for what works but not as written.",
		Example: `  agent-worker validate --config worker.yaml
  agent-worker validate -c worker.yaml --strict   # warnings fail too (CI)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usageError(cmd, errors.New("validate needs --config FILE"))
			}
			cfg, err := loadConfig(file, c.env)
			if err != nil {
				return err
			}
			warnings := configWarnings(cfg)
			for _, w := range warnings {
				fmt.Fprintln(c.stderr, w.String())
			}
			if strict && len(warnings) > 0 {
				return configError{fmt.Errorf("%s: %d warning(s), and --strict", file, len(warnings))}
			}
			note := ""
			if len(warnings) > 0 {
				note = fmt.Sprintf(", %d warning(s)", len(warnings))
			}
			fmt.Fprintf(c.stdout, "%s: ok (%d agent(s), %d model(s)%s)\n", file, len(cfg.Agents), len(cfg.Models), note)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "config file")
	cmd.Flags().BoolVar(&strict, "strict", false, "exit non-zero on warnings too")
	return cmd
}

func (c *cli) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version (also agent-worker --version).",
		Example: `  agent-worker version
  agent-worker --version`,
		Args: cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			fmt.Fprintln(c.stdout, versionLine())
		},
	}
}

// versionLine is what version and --version print.
func versionLine() string {
	adk := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "google.golang.org/adk" {
				adk = d.Version
			}
		}
	}
	return fmt.Sprintf("agent-worker %s (%s, adk %s)", version, runtime.Version(), adk)
}

// configWarnings are what a config asks for that cannot take effect as
// written: the config's own (config.Config.Warnings: deprecated keys,
// nats.max_age), then each cost ceiling it sets on an agent whose model
// has no price (it costs $0 here, so the ceiling never binds).
func configWarnings(cfg *config.Config) []config.Warning {
	prices := guard.NewPrices(cfg.Pricing)
	out := cfg.Warnings()
	unpricedAgents := 0
	for i, a := range cfg.Agents {
		def := cfg.Models[a.Model]
		name := def.Model
		if name == "" {
			name = a.Model
		}
		if _, ok := prices.Lookup(name); ok {
			continue
		}
		unpricedAgents++
		for _, b := range []struct {
			key string
			usd float64
		}{{"turn_usd", a.Budgets.TurnUSD}, {"session_usd", a.Budgets.SessionUSD}, {"daily_usd", a.Budgets.DailyUSD}} {
			p := fmt.Sprintf("agents[%d].budgets.%s", i, b.key)
			if b.usd > 0 && cfg.Written(p) {
				out = append(out, cfg.WarningAt(p, fmt.Sprintf("model %q (%s) has no price, so it costs $0 here and this %s ceiling cannot bind; add %q to pricing, or rely on limits (tokens, turns)", a.Model, name, money.USD(b.usd), name)))
			}
		}
	}
	if p := "guardrails.worker_daily_usd"; cfg.Guardrails.WorkerDailyUSD > 0 && cfg.Written(p) && unpricedAgents > 0 {
		out = append(out, cfg.WarningAt(p, fmt.Sprintf("%d agent(s) use a model with no price: their spend is $0 here and does not count against this ceiling", unpricedAgents)))
	}
	return out
}
