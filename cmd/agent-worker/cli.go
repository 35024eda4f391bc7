package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/agent-worker/agent-worker/config"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // the worker failed while running
	exitConfig = 2 // bad flags or a bad config: fix and retry
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// configError marks errors that are the user's input, for exit code 2.
type configError struct{ err error }

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }

// execute runs the command line args and returns the process exit code.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:           "agent-worker",
		Short:         "Run LLM agents unattended: sleep, wake, one turn, sleep again.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	root.AddCommand(runCmd(stdout, stderr), validateCmd(stdout), versionCmd(stdout), sendCmd(stdout))
	root.AddCommand(opsCmds(stdout)...)
	root.AddCommand(modelsCmd(stdout))
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, err)
	var ce configError
	if errors.As(err, &ce) {
		return exitConfig
	}
	if errors.Is(err, errUsage) {
		return exitConfig
	}
	return exitFailed
}

var errUsage = errors.New("usage")

func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Default(), nil
	}
	c, err := config.Load(path)
	if err != nil {
		return nil, configError{err}
	}
	return c, nil
}

func validateCmd(stdout io.Writer) *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   "validate --config FILE",
		Short: "Check a config file; print file:line: message for every problem.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return fmt.Errorf("%w: validate needs --config FILE", errUsage)
			}
			c, err := loadConfig(file)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s: ok (%d agent(s), %d model(s))\n", file, len(c.Agents), len(c.Models))
			return nil
		},
	}
	c.Flags().StringVarP(&file, "config", "c", "", "config file")
	return c
}

func versionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version.",
		Args:  cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			adk := "unknown"
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, d := range bi.Deps {
					if d.Path == "google.golang.org/adk" {
						adk = d.Version
					}
				}
			}
			fmt.Fprintf(stdout, "agent-worker %s (%s, adk %s)\n", version, runtime.Version(), adk)
		},
	}
}
