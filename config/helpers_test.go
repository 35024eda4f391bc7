package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// yamlDoc trims the newline that follows the opening backquote, so that
// line 1 of a test document is its first written line.
func yamlDoc(s string) string { return strings.TrimPrefix(s, "\n") }

// writeFiles writes name → content into a fresh directory and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// envMap is a lookup over a fixed environment, so that tests can run in
// parallel (t.Setenv cannot).
func envMap(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

// loadFiles writes files, loads config.yaml among them with env, and returns
// the config and the errors as "file:line: msg" with files relative to the
// directory.
func loadFiles(t *testing.T, files map[string]string, env map[string]string) (*Config, []string) {
	t.Helper()
	dir := writeFiles(t, files)
	c, err := load(filepath.Join(dir, "config.yaml"), envMap(env))
	return c, errorLines(t, dir, err)
}

func loadText(t *testing.T, text string) (*Config, []string) {
	t.Helper()
	return loadFiles(t, map[string]string{"config.yaml": yamlDoc(text)}, nil)
}

func errorLines(t *testing.T, dir string, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error is %T, want *Errors: %v", err, err)
	}
	if len(*errs) == 0 {
		t.Fatal("*Errors is empty")
	}
	var out []string
	for _, e := range *errs {
		if rel, rerr := filepath.Rel(dir, e.File); rerr == nil && e.File != "" {
			e.File = filepath.ToSlash(rel)
		}
		out = append(out, e.Error())
	}
	// Error() must print the same lines, one per problem.
	if got := strings.Split(errs.Error(), "\n"); len(got) != len(out) {
		t.Errorf("Error() has %d lines, want %d:\n%s", len(got), len(out), errs.Error())
	}
	return out
}

func assertErrors(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("errors:\n  got:  %s\n  want: %s", strings.Join(got, "\n        "), strings.Join(want, "\n        "))
	}
}
