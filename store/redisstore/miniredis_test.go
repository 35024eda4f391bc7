package redisstore_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/redisstore"
	"github.com/agent-worker/agent-worker/store/storetest"
)

// TestConformanceMiniredis runs the suite on miniredis, whose clock for
// expiry only moves when told: fast, and a check that the scripts keep to
// what an independent implementation of Redis does. It is in addition to,
// never instead of, TestConformance on a real redis-server.
func TestConformanceMiniredis(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	storetest.Run(t, storetest.Backend{
		New: func(t *testing.T) store.Store {
			return open(t, "redis://"+m.Addr(), redisstore.Options{Prefix: uniquePrefix("miniredis")})
		},
		Elapse: func(t *testing.T, d time.Duration) { m.FastForward(d) },
	})
}
