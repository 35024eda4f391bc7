package main

import (
	"strings"
	"testing"
)

// TestBadCommandLinesExit2 holds the README's exit codes: a command line
// that cannot run as written — an unknown command or flag, a wrong number
// of arguments, a bad flag value — exits 2 and says what is wrong, naming
// the help to read.
func TestBadCommandLinesExit2(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"frobnicate"}, `unknown command "frobnicate" for "agent-worker"`},
		{[]string{"stauts"}, "did you mean status?"},
		{[]string{"run", "--bogus"}, "unknown flag: --bogus (see agent-worker run --help)"},
		{[]string{"status", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"models", "frobnicate"}, `unknown command "frobnicate" for "agent-worker models"`},
		{[]string{"status", "a", "b"}, "accepts at most 1 arg(s), received 2"},
		{[]string{"pause"}, "accepts 1 arg(s), received 0"},
		{[]string{"send", "only-an-agent"}, "accepts 2 arg(s), received 1"},
		{[]string{"validate", "extra"}, "unknown command"},
		{[]string{"health", "--timeout", "soon"}, `invalid argument "soon"`},
		{[]string{"--log-format", "xml", "version"}, `--log-format: must be one of text, json; got "xml"`},
		{[]string{"--log-level", "loud", "version"}, `--log-level: must be one of debug, info, warn, error; got "loud"`},
		{[]string{"status", "-o", "yaml"}, `-o "yaml": want one of table, json, wide`},
		{[]string{"status", "--token", "a", "--token-file", "b"}, "give --token or --token-file, not both"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			out, errs, code := run(testEnv(nil), tc.args...)
			if code != exitConfig {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, exitConfig, out, errs)
			}
			if !strings.Contains(errs, tc.want) {
				t.Fatalf("stderr lacks %q: %s", tc.want, errs)
			}
		})
	}
}

// TestBadLogEnvExits2: a bad AGENT_WORKER_LOG_LEVEL stops every command
// with exit 2, naming the variable.
func TestBadLogEnvExits2(t *testing.T) {
	t.Parallel()
	_, errs, code := run(testEnv(map[string]string{envLogLevel: "chatty"}), "version")
	if code != exitConfig || !strings.Contains(errs, envLogLevel+`: must be one of debug, info, warn, error; got "chatty"`) {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

// TestVersionFlag: --version prints what the version command prints.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	flag, _, code := run(testEnv(nil), "--version")
	if code != exitOK || !strings.HasPrefix(flag, "agent-worker dev (go") {
		t.Fatalf("--version: exit %d, out %q", code, flag)
	}
	verb, _, _ := run(testEnv(nil), "version")
	if flag != verb {
		t.Fatalf("--version printed %q, version %q", flag, verb)
	}
}

// TestNoArgsPrintsHelp: the bare command still shows its help, exit 0.
func TestNoArgsPrintsHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"models"}} {
		out, errs, code := run(testEnv(nil), args...)
		if code != exitOK || !strings.Contains(out, "Available Commands:") {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errs)
		}
	}
}
