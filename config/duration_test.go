package config

import (
	"errors"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestDurationUnmarshal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		err  string
	}{
		{in: "30s", want: 30 * time.Second},
		{in: "1h30m", want: 90 * time.Minute},
		{in: `"5m"`, want: 5 * time.Minute},
		{in: "0", want: 0},
		{in: "0s", want: 0},
		{in: "30", err: `line 1: bad duration "30": want a number and a unit, like 30s, 5m or 1h30m`},
		{in: "soon", err: `line 1: bad duration "soon": want a number and a unit, like 30s, 5m or 1h30m`},
		{in: "-5s", err: `line 1: negative duration "-5s"`},
		{in: "[1s]", err: "line 1: want a duration like 30s or 1h30m, got a list"},
	}
	for _, tt := range tests {
		var v struct{ D Duration }
		err := yaml.Unmarshal([]byte("d: "+tt.in), &v)
		if tt.err == "" {
			if err != nil || v.D.D() != tt.want {
				t.Errorf("%s: got %v, %v; want %v", tt.in, v.D, err, tt.want)
			}
			continue
		}
		var te *yaml.TypeError
		if !errors.As(err, &te) || len(te.Errors) != 1 || te.Errors[0] != tt.err {
			t.Errorf("%s: error %v, want TypeError %q", tt.in, err, tt.err)
		}
	}
}

// Bad durations are *yaml.TypeError so that yaml.v3 keeps going and reports
// them all.
func TestDurationErrorsCollected(t *testing.T) {
	t.Parallel()
	var v struct{ A, B, C Duration }
	err := yaml.Unmarshal([]byte("a: x\nb: 2s\nc: -1s\n"), &v)
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) != 2 {
		t.Fatalf("got %v, want two errors", err)
	}
	if v.B.D() != 2*time.Second {
		t.Errorf("b = %v; good values must still decode", v.B)
	}
}

func TestDurationMarshal(t *testing.T) {
	t.Parallel()
	out, err := yaml.Marshal(struct{ D Duration }{Duration(90 * time.Minute)})
	if err != nil || string(out) != "d: 1h30m0s\n" {
		t.Errorf("got %q, %v", out, err)
	}
	var back struct{ D Duration }
	if err := yaml.Unmarshal(out, &back); err != nil || back.D.D() != 90*time.Minute {
		t.Errorf("round trip: %v, %v", back.D, err)
	}
}
