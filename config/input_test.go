package config

import (
	"slices"
	"testing"
	"time"
)

const oneAgent = "\nmodels: {m: {provider: scripted, script: [{text: ok}]}}\nagents: [{name: a, model: m}]\n"

// The input stream's bounds: their defaults when unset, -1 for no limit,
// and what InputLimits hands the wiring in JetStream's terms.
func TestInputLimits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		nats                string
		perSubject          int
		bytes               int64
		age                 Duration
		wantPerSubj, wantBy int64
		wantAge             time.Duration
	}{
		{"nats: {}", 100_000, 1 << 30, 0, 100_000, 1 << 30, 0},
		{"nats: {max_msgs_per_subject: -1, max_bytes: -1}", -1, -1, 0, -1, -1, 0},
		{"nats: {max_msgs_per_subject: 1, max_bytes: 1048576, max_age: 1m}", 1, 1 << 20, Duration(time.Minute), 1, 1 << 20, time.Minute},
		{"nats: {max_msgs_per_subject: 500, max_bytes: 8589934592, max_age: 72h}", 500, 8 << 30, Duration(72 * time.Hour), 500, 8 << 30, 72 * time.Hour},
	} {
		cfg, errs := loadText(t, "\n"+c.nats+oneAgent)
		if errs != nil {
			t.Errorf("%q: %q", c.nats, errs)
			continue
		}
		n := cfg.NATS
		if n.MaxMsgsPerSubject != c.perSubject || n.MaxBytes != c.bytes || n.MaxAge != c.age {
			t.Errorf("%q: max_msgs_per_subject %d, max_bytes %d, max_age %v; want %d, %d, %v", c.nats, n.MaxMsgsPerSubject, n.MaxBytes, n.MaxAge, c.perSubject, c.bytes, c.age)
		}
		if perSubj, by, age := n.InputLimits(); perSubj != c.wantPerSubj || by != c.wantBy || age != c.wantAge {
			t.Errorf("%q: InputLimits() = %d, %d, %v; want %d, %d, %v", c.nats, perSubj, by, age, c.wantPerSubj, c.wantBy, c.wantAge)
		}
	}
}

// InputLimits answers for a NATS whose defaults were never applied as
// Load would have filled it, and for any negative value as no limit.
func TestInputLimitsWithoutDefaults(t *testing.T) {
	t.Parallel()
	if perSubj, by, age := (NATS{}).InputLimits(); perSubj != 100_000 || by != 1<<30 || age != 0 {
		t.Errorf("NATS{}.InputLimits() = %d, %d, %v; want 100000, 1073741824, 0", perSubj, by, age)
	}
	if perSubj, by, _ := (NATS{MaxMsgsPerSubject: -7, MaxBytes: -2}).InputLimits(); perSubj != -1 || by != -1 {
		t.Errorf("negative limits = %d, %d; want -1, -1 (no limit)", perSubj, by)
	}
	if d := Default().NATS; d.MaxMsgsPerSubject != 100_000 || d.MaxBytes != 1<<30 || d.MaxAge != 0 {
		t.Errorf("Default().NATS = %d, %d, %v", d.MaxMsgsPerSubject, d.MaxBytes, d.MaxAge)
	}
}

// A bound that cannot be meant fails with its line: below the floors, a
// negative count other than -1, a size that cannot hold one message.
func TestInputLimitsValidation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		nats string
		errs []string
	}{
		{"nats:\n  max_msgs_per_subject: -2", []string{"config.yaml:2: nats.max_msgs_per_subject: must be -1 (no limit) or at least 1; got -2"}},
		{"nats:\n  max_bytes: 1048575", []string{"config.yaml:2: nats.max_bytes: must be -1 (no limit) or at least 1048576 (1 MiB); got 1048575"}},
		{"nats:\n  max_bytes: -5", []string{"config.yaml:2: nats.max_bytes: must be -1 (no limit) or at least 1048576 (1 MiB); got -5"}},
		{"nats:\n  max_message_bytes: 2097152\n  max_bytes: 1048576", []string{"config.yaml:3: nats.max_bytes: must be at least nats.max_message_bytes (2097152), or a message that large could never be stored; got 1048576"}},
		{"nats:\n  max_message_bytes: 2097152\n  max_bytes: -1", nil},
		{"nats:\n  max_age: 59s", []string{"config.yaml:2: nats.max_age: must be 0 (no maximum age) or at least 1m; got 59s"}},
		{"nats:\n  max_age: -1m", []string{`config.yaml:2: nats.max_age: negative duration "-1m"`}},
		{"nats:\n  read_ahead_bytes: 1000", []string{"config.yaml:2: nats.read_ahead_bytes: must be -1 (keep none), 0 (the default, 32 MiB) or at least nats.max_message_bytes (65536); got 1000"}},
		{"nats:\n  read_ahead_bytes: -2", []string{"config.yaml:2: nats.read_ahead_bytes: must be -1 (keep none), 0 (the default, 32 MiB) or at least nats.max_message_bytes (65536); got -2"}},
		{"nats:\n  read_ahead_bytes: -1", nil},
		{"nats:\n  read_ahead_bytes: 65536", nil},
	} {
		if _, errs := loadText(t, "\n"+c.nats+oneAgent); !slices.Equal(errs, c.errs) {
			t.Errorf("%q: errors\n  %q\nwant\n  %q", c.nats, errs, c.errs)
		}
	}
}
