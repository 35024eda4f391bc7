package alerting

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The Debian packages that provide the binaries; scripts/deps (run by make
// test and make deps) installs them.
var binaries = []struct{ cmd, pkg string }{
	{"prometheus", "prometheus"},
	{"prometheus-alertmanager", "prometheus-alertmanager"},
	{"amtool", "prometheus-alertmanager"},
	{"promtool", "prometheus"},
}

// lookBinaries finds the binaries the test runs. A missing one fails the
// test: it is part of make test, so a machine without them must say so,
// not skip.
func lookBinaries(t *testing.T) map[string]string {
	t.Helper()
	paths := map[string]string{}
	var missing []string
	for _, b := range binaries {
		p, err := exec.LookPath(b.cmd)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", b.cmd, b.pkg))
			continue
		}
		paths[b.cmd] = p
	}
	if len(missing) > 0 {
		t.Fatalf("not on PATH: %s; run `make deps` (scripts/deps installs them), or apt-get install -y prometheus prometheus-alertmanager",
			strings.Join(missing, ", "))
	}
	return paths
}

// freeAddr returns a 127.0.0.1 address with a port nobody listened on a
// moment ago, for a child process that takes its address as a flag.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// proc is a child process whose output goes to a log file in the test's
// temp dir; it is stopped when the test ends.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // after done
}

func startProc(t *testing.T, dir, name, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	out, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		_ = out.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s (pid %d) log, last lines:\n%s", name, p.cmd.Process.Pid, p.tail(40))
		}
	})
	return p
}

// stop ends the process: SIGTERM, then SIGKILL after 5 seconds.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail returns the last n lines of the process's log.
func (p *proc) tail(n int) string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		lines[i] = clip(l, 300)
	}
	return strings.Join(lines, "\n")
}

// waitReady polls url until it answers 200, failing at once when the
// process exits (a bad flag, a bad config, a port taken).
func (p *proc) waitReady(t *testing.T, url string, within time.Duration) {
	t.Helper()
	end := time.Now().Add(within)
	for {
		if p.exited() {
			t.Fatalf("%s exited before it was ready (%v):\n%s", p.name, p.err, p.tail(30))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		cancel()
		if err == nil && resp.StatusCode == http.StatusOK {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s not ready at %s within %v (last: %v):\n%s", p.name, url, within, errors.Join(err, statusErr(resp)), p.tail(30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func statusErr(resp *http.Response) error {
	if resp == nil {
		return nil
	}
	return fmt.Errorf("status %s", resp.Status)
}

// checkConfig runs amtool check-config on an Alertmanager config file.
func checkConfig(t *testing.T, amtool, path string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(amtool, "check-config", path)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("amtool check-config %s: %v\n%s", path, err, out.String())
	}
}
