package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadSecret(t *testing.T) { // not parallel: sets the environment
	t.Setenv("SECRET_SET", "  s3cret \n")
	t.Setenv("SECRET_BLANK", "  ")
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env, file, want, err string
	}{
		{env: "SECRET_SET", want: "s3cret"},
		{file: file, want: "from-file"},
		{},
		{env: "SECRET_BLANK", err: "api_key_env: environment variable SECRET_BLANK is not set"},
		{env: "SECRET_MISSING_HERE", err: "api_key_env: environment variable SECRET_MISSING_HERE is not set"},
		{file: file + ".nope", err: "api_key_file: open "},
	} {
		got, err := ReadSecret("api_key", tc.env, tc.file)
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("ReadSecret(%q, %q) error = %v, want %q...", tc.env, tc.file, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ReadSecret(%q, %q) = %q, %v; want %q", tc.env, tc.file, got, err, tc.want)
		}
	}
}
