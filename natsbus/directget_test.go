package natsbus

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestDirectBatchReadsARunOfOneSubjectFilter(t *testing.T) {
	t.Parallel()
	c := embedded(t)
	ctx := context.Background()
	if _, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "LOG", Subjects: []string{"a.*", "b.*"}, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		subj := fmt.Sprintf("a.%d", i)
		if i%2 == 0 {
			subj = fmt.Sprintf("b.%d", i)
		}
		m := nats.NewMsg(subj)
		m.Data = []byte(subj)
		m.Header.Set("X-Mine", subj)
		if _, err := c.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// a.1 at 1, a.3 at 3, a.5 at 5.
	res, err := DirectBatch(ctx, c.NC, DirectRequest{Stream: "LOG", Filter: "a.*", From: 2, Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Msgs) != 1 || res.Msgs[0].Seq != 3 || res.Msgs[0].Subject != "a.3" || string(res.Msgs[0].Data) != "a.3" || res.Pending != 1 {
		t.Fatalf("batch of 1 from 2: %+v", res)
	}
	if got := res.Msgs[0].Header; got.Get("X-Mine") != "a.3" || got.Get("Nats-Sequence") != "" || got.Get("Nats-Num-Pending") != "" {
		t.Fatalf("headers: own ones kept, the direct get's removed: %v", got)
	}
	if res.Msgs[0].Time.IsZero() {
		t.Fatal("no time stamp")
	}
	res, err = DirectBatch(ctx, c.NC, DirectRequest{Stream: "LOG", Filter: "a.*", Batch: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Msgs) != 3 || res.Msgs[0].Seq != 1 || res.Msgs[2].Seq != 5 || res.Pending != 0 {
		t.Fatalf("whole run: %+v", res)
	}
	res, err = DirectBatch(ctx, c.NC, DirectRequest{Stream: "LOG", Filter: "a.*", From: 6, Batch: 10})
	if err != nil || len(res.Msgs) != 0 || res.Pending != 0 {
		t.Fatalf("nothing after 6: %+v, %v", res, err)
	}
	// A byte bound stops the run early and says how many remain.
	res, err = DirectBatch(ctx, c.NC, DirectRequest{Stream: "LOG", Filter: ">", Batch: 10, MaxBytes: 1})
	if err != nil || len(res.Msgs) != 1 || res.Pending != 5 {
		t.Fatalf("max bytes: %+v, %v", res, err)
	}
}

func TestDirectBatchWithoutAllowDirectSaysSo(t *testing.T) {
	t.Parallel()
	c := embedded(t)
	ctx := context.Background()
	if _, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"p.>"}}); err != nil {
		t.Fatal(err)
	}
	_, err := DirectBatch(ctx, c.NC, DirectRequest{Stream: "PLAIN", Batch: 5})
	if !errors.Is(err, ErrNoDirect) {
		t.Fatalf("err = %v, want ErrNoDirect", err)
	}
}
