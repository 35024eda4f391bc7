package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandHasExamples walks the whole command tree: every command
// a user can run or ask --help of shows an Examples section, as kubectl's,
// helm's and nats's do. On the old code only steer had one.
func TestEveryCommandHasExamples(t *testing.T) {
	t.Parallel()
	c := &cli{env: testEnv(nil)}
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		if cmd.Runnable() && !cmd.Hidden && strings.TrimSpace(cmd.Example) == "" {
			t.Errorf("%s has no Example", cmd.CommandPath())
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(c.rootCmd())
}

// TestHelpExamplesGolden pins the Examples section of three helps, as a
// user reads them: indented, one command line each, after "Examples:".
func TestHelpExamplesGolden(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pause", "--help"}, `
  agent-worker pause oncall --reason "db migration"
  agent-worker pause oncall --api http://worker:8080 --token-file ~/.agent-worker-token
`},
		{[]string{"dlq", "replay", "--help"}, `
  agent-worker dlq replay oncall 42
  agent-worker dlq replay oncall 42 --reason "db is back"
`},
		{[]string{"resume", "--help"}, `
  agent-worker resume oncall
  agent-worker resume oncall --message "the migration is done; re-check db-2"
  agent-worker resume oncall --drop-queued --reason "stale alerts"
`},
	} {
		out, errs, code := run(testEnv(nil), c.args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", c.args, code, errs)
		}
		if got := examplesSection(out); got != strings.TrimPrefix(c.want, "\n") {
			t.Errorf("%v: Examples section\n%s\nwant\n%s\nwhole help:\n%s", c.args, got, c.want, out)
		}
	}
}

// examplesSection is the lines of help after "Examples:" up to the next
// blank line, each with its newline.
func examplesSection(help string) string {
	_, rest, ok := strings.Cut(help, "\nExamples:\n")
	if !ok {
		return ""
	}
	section, _, _ := strings.Cut(rest, "\n\n")
	return section + "\n"
}
