package metrics

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"
)

// Event data arrives as Go values in-process (int, int64, uint64, float64,
// time.Time, string, or named types over them) and as JSON-decoded values
// (float64, json.Number, RFC 3339 strings) when an event took a detour
// through an encoder. These conversions accept all of them and report
// false for anything else, so a malformed field skips one observation
// instead of panicking.

// number converts v to a finite float64.
func number(v any) (float64, bool) {
	var f float64
	switch x := v.(type) {
	case nil:
		return 0, false
	case json.Number:
		var err error
		if f, err = x.Float64(); err != nil {
			return 0, false
		}
	case string:
		var err error
		if f, err = strconv.ParseFloat(x, 64); err != nil {
			return 0, false
		}
	default:
		rv := reflect.ValueOf(v)
		switch rv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f = float64(rv.Int())
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			f = float64(rv.Uint())
		case reflect.Float32, reflect.Float64:
			f = rv.Float()
		default:
			return 0, false
		}
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// text converts v to a string: a string, a named string type, or a
// fmt.Stringer. Anything else is "".
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case fmt.Stringer:
		return x.String()
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.String {
		return rv.String()
	}
	return ""
}

// instant converts v to a non-zero time: a time.Time, a *time.Time, or an
// RFC 3339 string.
func instant(v any) (time.Time, bool) {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = x
	case *time.Time:
		if x == nil {
			return time.Time{}, false
		}
		t = *x
	case string:
		var err error
		if t, err = time.Parse(time.RFC3339Nano, x); err != nil {
			return time.Time{}, false
		}
	default:
		return time.Time{}, false
	}
	return t, !t.IsZero()
}

// unixSeconds is t as fractional seconds since the Unix epoch.
func unixSeconds(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}
