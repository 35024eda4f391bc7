package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// reaper starts the harness's child processes and makes sure they end:
// each runs in its own process group (a Ctrl-C in the terminal reaches
// only the harness, which then kills them), gets SIGKILL from the kernel
// if the harness dies (Pdeathsig), and killAll ends every one still
// running.
type reaper struct {
	mu   sync.Mutex
	live map[*proc]struct{}
}

func newReaper() *reaper { return &reaper{live: map[*proc]struct{}{}} }

// proc is one started child process.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been waited for
	err  error         // its exit, once done is closed
}

// start runs argv with its stdout appended to outPath and its stderr to
// errPath (which may be the same file).
func (r *reaper) start(name, outPath, errPath string, argv []string) (*proc, error) {
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer out.Close() // the child has its own copy
	errf := out
	if errPath != outPath {
		if errf, err = os.OpenFile(errPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			return nil, err
		}
		defer errf.Close()
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, errf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that forked the child exits;
		// keep that thread for as long as the child lives.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		r.mu.Lock()
		r.live[p] = struct{}{}
		r.mu.Unlock()
		started <- nil
		p.err = cmd.Wait()
		r.mu.Lock()
		delete(r.live, p)
		r.mu.Unlock()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process's group.
func (p *proc) signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// kill ends the process with SIGKILL and waits until it is gone.
func (p *proc) kill() error {
	p.signal(syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) still running 10s after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// stop sends SIGTERM and waits up to grace for the process to exit; past
// that it is killed and stop reports it.
func (p *proc) stop(grace time.Duration) error {
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		err := p.kill()
		return errors.Join(fmt.Errorf("%s did not exit within %v of SIGTERM; killed", p.name, grace), err)
	}
}

// killAll kills every child still running and waits for each.
func (r *reaper) killAll() {
	r.mu.Lock()
	live := make([]*proc, 0, len(r.live))
	for p := range r.live {
		live = append(live, p)
	}
	r.mu.Unlock()
	for _, p := range live {
		if err := p.kill(); err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
		}
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// poll calls cond every interval until it returns true or an error, ctx
// ends, or timeout passes (then it returns an error naming what).
func poll(ctx context.Context, timeout, interval time.Duration, what string, cond func() (bool, error)) error {
	end := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		}
		if err := sleep(ctx, interval); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
	}
}

// sleep waits d or until ctx ends. It is for pacing (between polls,
// between publishes) and for fault durations, never to wait for a
// condition.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// ensureNewline ends the file at path with a newline if it has content
// that does not, so the lines of a restarted process do not continue a
// line its killed predecessor left unfinished.
func ensureNewline(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, st.Size()-1); err != nil {
		return err
	}
	if last[0] != '\n' {
		_, err = f.Write([]byte{'\n'})
	}
	return err
}

// logged reports whether the file at path holds s.
func logged(path, s string) bool {
	data, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(data), s)
}
