package redisstore

import "testing"

// TestSlotOf: the hash slots Redis Cluster gives these keys (CLUSTER
// KEYSLOT on redis-server 7.0): a {hash tag} hashes alone, an empty one
// does not count.
func TestSlotOf(t *testing.T) {
	for key, want := range map[string]uint16{
		"foo":                            12182,
		"bar":                            5061,
		"{user1000}.following":           3443,
		"foo{}{bar}":                     8363,
		"agent-worker:k:lease.a1":        15698,
		"agent-worker:k:agent.a1.paused": 8217,
	} {
		if got := slotOf(key); got != want {
			t.Errorf("slotOf(%q) = %d, want %d", key, got, want)
		}
	}
}
