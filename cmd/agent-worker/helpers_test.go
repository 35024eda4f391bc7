package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/internal/wait"
)

// waitDeadline bounds every wait of these tests; the waits poll and
// return as soon as what they wait for happens.
const waitDeadline = 20 * time.Second

// testEnv is an environment holding only vars, outside any container, so
// tests that use it may run in parallel.
func testEnv(vars map[string]string) environ {
	return environ{
		lookup: func(k string) (string, bool) {
			v, ok := vars[k]
			return v, ok
		},
		inContainer: func() bool { return false },
	}
}

// eventually polls cond until it holds; after waitDeadline it fails the
// test with the message and what detail returns.
func eventually(t *testing.T, cond func() bool, detail func() string, format string, args ...any) {
	t.Helper()
	wait.NoError(t, waitDeadline, fmt.Sprintf(format, args...), func() error {
		if cond() {
			return nil
		}
		return lateDetail(detail)
	})
}

// lateDetail is a failed condition whose text, detail's, is built only
// when the failure is reported, not on every poll.
type lateDetail func() string

func (d lateDetail) Error() string { return "\n" + d() }

// runningCmd is a command line executing in the background, as a process
// would.
type runningCmd struct {
	out, errb syncBuffer
	cancel    context.CancelFunc
	done      chan int
}

// startCmd executes args in env in the background; the test's cleanup
// stops it if the test has not.
func startCmd(t *testing.T, env environ, args ...string) *runningCmd {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningCmd{cancel: cancel, done: make(chan int, 1)}
	go func() { r.done <- executeIn(ctx, env, args, &r.out, &r.errb) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-r.done:
			r.done <- code
		case <-time.After(waitDeadline):
			t.Error("the command did not stop")
		}
	})
	return r
}

// stop cancels the command (SIGINT, for run) and returns its exit code.
func (r *runningCmd) stop(t *testing.T) int {
	t.Helper()
	r.cancel()
	select {
	case code := <-r.done:
		r.done <- code // for the cleanup
		return code
	case <-time.After(waitDeadline):
		t.Fatalf("the command did not stop after cancellation:\n%s", r.errb.String())
		return 0
	}
}

// logs is what the command wrote to stdout and stderr, for failures.
func (r *runningCmd) logs() string {
	return "stdout:\n" + r.out.String() + "\nstderr:\n" + r.errb.String()
}

// bannerAPI waits for the text banner's operator API URL on stdout.
func (r *runningCmd) bannerAPI(t *testing.T) string {
	t.Helper()
	var url string
	eventually(t, func() bool {
		for _, line := range strings.Split(r.out.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, "operator API:    "); ok {
				url, _, _ = strings.Cut(rest, " ")
				return true
			}
		}
		return false
	}, r.logs, "no operator API URL in the banner")
	return url
}

// run executes args in env to the end and returns stdout, stderr and the
// exit code.
func run(env environ, args ...string) (stdout, stderr string, code int) {
	var out, errb syncBuffer
	code = executeIn(context.Background(), env, args, &out, &errb)
	return out.String(), errb.String(), code
}
