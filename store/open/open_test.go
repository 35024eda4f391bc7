package open

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/config"
)

func TestStoreMarksConfigurationErrors(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	for _, cfg := range []config.Store{
		{URL: "nats://state"}, // no JetStream
		{URL: "ftp://u:hunter2@h"},
		{URL: "redis://localhost:6379/0", TLS: config.TLS{CAFile: "/nonexistent/ca.pem"}},
	} {
		_, err := Store(context.Background(), cfg, 1, nil, log)
		if !errors.Is(err, ErrConfig) {
			t.Errorf("Store(%q) = %v, want ErrConfig", cfg.URL, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Store(%q) error shows the password: %v", cfg.URL, err)
		}
	}
	s, err := Store(context.Background(), config.Store{URL: "memory://"}, 1, nil, log)
	if err != nil || s == nil {
		t.Fatalf("Store(memory://) = %v, %v", s, err)
	}
	_ = s.Close()
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"redis://:hunter2@localhost:6379/0": "redis://:xxxxx@localhost:6379/0",
		"memory://":                         "memory://",
		"no scheme":                         "no scheme",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
