package worker

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// startRedis runs a real redis-server on a free loopback port for the
// test and returns its address. CI installs Debian's redis-server.
func startRedis(t *testing.T) string {
	t.Helper()
	addr, _ := startRedisProc(t)
	return addr
}

// startRedisProc is startRedis that also returns the server's process, so
// a test can stop (SIGSTOP) and continue it.
func startRedisProc(t *testing.T) (string, *exec.Cmd) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server not found: install Debian's redis-server package (.ci/run does)")
	}
	port := freePort(t)
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	end := time.Now().Add(deadline)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			fmt.Fprint(c, "PING\r\n")
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") {
				return addr, cmd
			}
		}
		if time.Now().After(end) {
			t.Fatalf("redis-server on %s never answered PING", addr)
		}
		<-time.After(10 * time.Millisecond)
	}
}

func TestStateInRedisSurvivesAWorkerRestart(t *testing.T) {
	t.Parallel()
	addr := startRedis(t)
	s := setup{dataDir: t.TempDir(), top: fmt.Sprintf("store: {url: \"redis://%s/0\"}\n", addr),
		script: `[{call: {name: schedule_next_turn, args: {wake_in_seconds: 3600}}}, {text: "later"}]`}
	r := start(t, writeConfig(t, s), newRecorder(), nil)
	r.publish("agents.triage.inbox", "check again in an hour")
	r.waitEvent(events.TurnCompleted)
	a := r.agent()
	want := a.Status().NextWake
	if want == nil {
		t.Fatal("no wake requested")
	}
	a.Pause()
	r.stop()

	r2 := start(t, writeConfig(t, s), newRecorder(), nil)
	b := r2.agent()
	wait.Within(t, deadline, "state restored from Redis", func() bool {
		st := b.Status()
		return st.State == driver.Paused && st.NextWake != nil && st.NextWake.Equal(*want)
	})
	hist, err := r2.w.Store().Tail(t.Context(), "history.agent-worker.triage.triage", 0)
	if err != nil || len(hist) != 1 {
		t.Fatalf("history in Redis: %d turns, %v", len(hist), err)
	}
}
