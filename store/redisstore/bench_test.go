package redisstore_test

import (
	"context"
	"testing"

	"github.com/agent-worker/agent-worker/store/redisstore"
)

// BenchmarkPutGet is one Put (a script) and one Get (HMGET) on the real
// server over loopback: two round trips per op.
func BenchmarkPutGet(b *testing.B) {
	srv := sharedServer(b)
	s := open(b, "redis://"+srv.addr, redisstore.Options{Prefix: uniquePrefix("bench")})
	ctx := context.Background()
	value := []byte(`{"spend_usd":1.25,"day":"2026-01-02"}`)
	for b.Loop() {
		rev, err := s.Put(ctx, "agent.bench.spend", value)
		if err != nil {
			b.Fatal(err)
		}
		e, err := s.Get(ctx, "agent.bench.spend")
		if err != nil || e.Revision != rev {
			b.Fatalf("Get = rev %d, %v; want %d", e.Revision, err, rev)
		}
	}
}
