package worker

import (
	"maps"
	"reflect"
	"slices"
)

// Keys names the entries of a map-valued key of the config (mcp_servers,
// webhooks) that a reload adds, removes and changes, each sorted.
type Keys struct {
	Added, Removed, Changed []string
}

// Empty reports whether nothing was added, removed or changed.
func (k Keys) Empty() bool { return len(k.Added)+len(k.Removed)+len(k.Changed) == 0 }

// data is k as the config-reloaded event carries it: three lists, never
// null.
func (k Keys) data() map[string]any {
	return map[string]any{"added": nonNil(k.Added), "removed": nonNil(k.Removed), "changed": nonNil(k.Changed)}
}

// diffKeys compares the entries of old and next by name: a name on one
// side only is added or removed, one whose value differs is changed.
func diffKeys[V any](old, next map[string]V) Keys {
	var k Keys
	for _, name := range slices.Sorted(maps.Keys(next)) {
		prev, ok := old[name]
		switch {
		case !ok:
			k.Added = append(k.Added, name)
		case !reflect.DeepEqual(prev, next[name]):
			k.Changed = append(k.Changed, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(old)) {
		if _, ok := next[name]; !ok {
			k.Removed = append(k.Removed, name)
		}
	}
	return k
}
