package inbox

import (
	"iter"
	"maps"
	"slices"
)

// sorted yields m's entries in key order, so a prompt renders the same
// way every time.
func sorted(m map[string]string) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}
