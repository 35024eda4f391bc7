package natskv_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/store/natskv"
)

// Replicas above 1 need a JetStream cluster: on a single server Open fails
// and says so. (Buckets with 3 replicas on a real three-server cluster,
// and an R1 bucket changed to R3, are tested in natsbus's cluster tests.)
func TestReplicasNeedACluster(t *testing.T) {
	t.Parallel()
	ns := startServer(t, t.TempDir())
	_, js := connect(t, ns)
	ctx := context.Background()
	_, err := natskv.Open(ctx, js, natskv.Options{Bucket: "r3", Replicas: 3})
	if err == nil || !strings.Contains(err.Error(), "3 replicas need a JetStream cluster of at least 3 servers") {
		t.Fatalf("open with 3 replicas on one server: err = %v", err)
	}
	if _, err := natskv.Open(ctx, js, natskv.Options{Bucket: "neg", Replicas: -1}); err == nil {
		t.Fatal("negative replicas accepted")
	}
	s := open(t, js, natskv.Options{Bucket: "r1", Replicas: 1})
	if _, err := s.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KV_r1-state")
	if err != nil || st.CachedInfo().Config.Replicas != 1 {
		t.Fatalf("KV_r1-state: %v", err)
	}
}
