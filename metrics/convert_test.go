package metrics

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

func TestNumber(t *testing.T) {
	t.Parallel()
	type ms int64
	cases := []struct {
		in   any
		want float64
		ok   bool
	}{
		{int(3), 3, true},
		{int32(-4), -4, true},
		{int64(1500), 1500, true},
		{uint64(7), 7, true},
		{uint8(2), 2, true},
		{float32(0.5), 0.5, true},
		{0.0015, 0.0015, true},
		{ms(250), 250, true},
		{json.Number("12.5"), 12.5, true},
		{"42", 42, true},
		{"free", 0, false},
		{math.NaN(), 0, false},
		{math.Inf(1), 0, false},
		{nil, 0, false},
		{true, 0, false},
		{[]int{1}, 0, false},
	}
	for _, c := range cases {
		got, ok := number(c.in)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("number(%#v) = %g, %v; want %g, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	type source string
	for _, c := range []struct {
		in   any
		want string
	}{
		{"inbox", "inbox"},
		{source("timer"), "timer"},
		{time.Second, "1s"},
		{42, ""},
		{nil, ""},
	} {
		if got := text(c.in); got != c.want {
			t.Errorf("text(%#v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestInstant(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in any
		ok bool
	}{
		{at, true},
		{&at, true},
		{at.Format(time.RFC3339Nano), true},
		{time.Time{}, false},
		{(*time.Time)(nil), false},
		{"yesterday", false},
		{at.Unix(), false},
	} {
		got, ok := instant(c.in)
		if ok != c.ok || (ok && !got.Equal(at)) {
			t.Errorf("instant(%#v) = %v, %v; want %v, %v", c.in, got, ok, at, c.ok)
		}
	}
}
