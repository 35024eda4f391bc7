package store_test

import (
	"testing"

	"github.com/agent-worker/agent-worker/store"
)

func TestValidKey(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]bool{
		"agent.oncall.halt": true, "history.agent-worker.oncall.oncall": true, "handled.oncall.3f2a_9C": true,
		"a": true, "a=b/c": true,
		"": false, ".a": false, "a.": false, "a..b": false, "a b": false, "a.*": false, "a.{b}": false,
		"agent.ö": false, "a\nb": false, ".": false,
	} {
		if got := store.ValidKey(key); got != want {
			t.Errorf("ValidKey(%q) = %v, want %v", key, got, want)
		}
	}
}
