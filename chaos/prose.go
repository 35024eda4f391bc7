package main

import (
	"fmt"
	"strings"
	"time"
)

// when returns s when cond holds, else "".
func when(cond bool, s string) string {
	if cond {
		return s
	}
	return ""
}

// human renders a round duration for a sentence: "5 s", "40 ms".
func human(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

// numbered returns n names: prefix01, prefix02, ...
func numbered(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%02d", prefix, i+1)
	}
	return names
}

// list renders names for a sentence: "a1, a2" or "none".
func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
