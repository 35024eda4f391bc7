//go:build linux

package natsbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// smallFS mounts an 8 MiB tmpfs for the test and unmounts it in cleanup.
// It needs root (CAP_SYS_ADMIN); without it the test fails, on purpose:
// filling the real data filesystem is no substitute.
func smallFS(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=8m,mode=0700"); err != nil {
		t.Fatalf("this test fills a real filesystem and needs to mount an 8 MiB tmpfs on %s, which failed: %v; run the tests as root (or with CAP_SYS_ADMIN)", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// fill writes path until the filesystem has no space left.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v, want ENOSPC", path, err)
			}
			break
		}
	}
	for n := 4096; n > 0; n /= 2 { // the last partial page
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
}

// TestDiskFullIsReportedAndRecoveredWithoutRestart runs the embedded
// server on an 8 MiB tmpfs, fills it with a file until ENOSPC, publishes
// until a publish fails, and checks that StorageErr and the log report
// it; then it deletes the file and checks that JetStream recovers by
// itself: publishes, the consumer and the KV bucket work again, and every
// acknowledged message is still in the stream. Twice, for two episodes.
func TestDiskFullIsReportedAndRecoveredWithoutRestart(t *testing.T) {
	t.Parallel()
	mnt := smallFS(t)
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c, err := Connect(config.NATS{Listen: "-1"}, mnt, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := context.Background()
	js := c.JS
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DISK", Subjects: []string{"disk.>"}, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "state", Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "agent", AckPolicy: jetstream.AckExplicitPolicy, FilterSubjects: []string{"disk.in"}})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 2000)
	cc, err := cons.Consume(func(m jetstream.Msg) { got <- string(m.Data()); _ = m.Ack() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	acked := map[uint64]string{} // every message the server acknowledged
	publish := func(timeout time.Duration, data string) error {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		ack, err := js.Publish(pctx, "disk.in", []byte(data))
		if err == nil {
			acked[ack.Sequence] = data
		}
		return err
	}
	for i := range 20 {
		if err := publish(5*time.Second, fmt.Sprintf("before-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.StorageErr(); err != nil {
		t.Fatalf("StorageErr before the disk filled: %v", err)
	}

	maxStore := c.server.JetStreamConfig().MaxStore
	filler := filepath.Join(mnt, "filler")
	payload := strings.Repeat("x", 512)
	for episode := 1; episode <= 2; episode++ {
		serverErrs := countLines(logs.String(), "level=ERROR", "component=nats-server", "no space left on device")
		fill(t, filler)
		var pubErr error
		for i := 0; i < 1000 && pubErr == nil; i++ {
			pubErr = publish(time.Second, fmt.Sprintf("full-%d-%d-%s", episode, i, payload))
		}
		if pubErr == nil {
			t.Fatal("1000 publishes succeeded on a full disk")
		}
		t.Logf("episode %d: publish on the full disk: %v (%d messages acknowledged so far)", episode, pubErr, len(acked))
		wait.Within(t, 10*time.Second, "StorageErr to report the full disk", func() bool { return c.StorageErr() != nil })
		if err := c.StorageErr(); !errors.Is(err, ErrStorage) {
			t.Fatalf("StorageErr = %v, want one wrapping ErrStorage", err)
		} else {
			t.Logf("episode %d: StorageErr: %v", episode, err)
		}
		if countLines(logs.String(), "level=ERROR", "component=nats-server", "no space left on device") == serverErrs {
			t.Fatalf("the server's write error is not in the worker's log:\n%s", logs)
		}

		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		wait.Within(t, 30*time.Second, "storage to recover", func() bool { return c.StorageErr() == nil })

		after := fmt.Sprintf("after-%d", episode)
		if err := publish(5*time.Second, after); err != nil {
			t.Fatalf("publish after recovery: %v", err)
		}
		// The restart dropped the consumer's pull request; the monitor's
		// reconnect makes Consume pull again at once, not after missing
		// heartbeats for 30s.
		wait.Within(t, 5*time.Second, "the consumer to get "+after, func() bool {
			for {
				select {
				case m := <-got:
					if m == after {
						return true
					}
				default:
					return false
				}
			}
		})
		for seq, want := range acked {
			m, err := s.GetMsg(ctx, seq)
			if err != nil {
				t.Fatalf("acknowledged message %d after recovery: %v", seq, err)
			}
			if string(m.Data) != want {
				t.Fatalf("message %d = %.20q, want %.20q", seq, m.Data, want)
			}
		}
		if e, err := kv.Get(ctx, "k"); err != nil || string(e.Value()) != fmt.Sprint("v", episode) {
			t.Fatalf("KV get after recovery: %v %v", e, err)
		}
		if _, err := kv.Put(ctx, "k", fmt.Append(nil, "v", episode+1)); err != nil {
			t.Fatalf("KV put after recovery: %v", err)
		}
		if e, err := kv.Get(ctx, "k"); err != nil || string(e.Value()) != fmt.Sprint("v", episode+1) {
			t.Fatalf("KV get after put after recovery: %v %v", e, err)
		}
		if got := c.server.JetStreamConfig().MaxStore; got != maxStore {
			t.Errorf("JetStream's max store changed from %d to %d by the restart", maxStore, got)
		}
		out := logs.String()
		for _, msg := range []string{`msg="JetStream storage failed"`, `msg="JetStream storage recovered"`} {
			if n := strings.Count(out, msg); n != episode {
				t.Errorf("%s logged %d times in %d episodes, want once each:\n%s", msg, n, episode, out)
			}
		}
		if strings.Contains(out, "NATS connection lost") {
			t.Errorf("the reconnect after the restart was logged as a lost connection:\n%s", out)
		}
	}
}

func countLines(out string, parts ...string) int {
	n := 0
	for line := range strings.SplitSeq(out, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}
