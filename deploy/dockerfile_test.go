// Package deploy holds no code: its test checks the Dockerfile the image
// is built from, since no container engine runs here.
package deploy

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// instructions reads ../Dockerfile as (instruction, arguments) pairs,
// joining continuation lines.
func instructions(t *testing.T) [][2]string {
	t.Helper()
	f, err := os.Open("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][2]string
	var cur string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if rest, ok := strings.CutSuffix(line, "\\"); ok {
			cur += rest + " "
			continue
		}
		cur += line
		kw, args, _ := strings.Cut(cur, " ")
		out = append(out, [2]string{strings.ToUpper(kw), strings.TrimSpace(args)})
		cur = ""
	}
	return out
}

// Every base image is fully qualified (a registry host) and pinned by
// digest, so podman and buildah resolve it and a rebuild gets the same
// bytes.
func TestBaseImagesArePinnedByDigest(t *testing.T) {
	t.Parallel()
	pinned := regexp.MustCompile(`^[a-z0-9.-]+\.[a-z]+(:[0-9]+)?/[a-z0-9._/-]+(:[A-Za-z0-9._-]+)?@sha256:[0-9a-f]{64}$`)
	froms := 0
	for _, in := range instructions(t) {
		if in[0] != "FROM" {
			continue
		}
		froms++
		image := strings.Fields(in[1])[0]
		if !pinned.MatchString(image) {
			t.Errorf("FROM %s: want registry/name[:tag]@sha256:<64 hex>", image)
		}
	}
	if froms != 2 {
		t.Fatalf("%d FROM lines, want a build and a runtime stage", froms)
	}
}

// The runtime stage runs as the distroless nonroot user, owns /data
// without a volume, checks its health with its own binary (distroless has
// no curl), and runs the worker by default.
func TestRuntimeStage(t *testing.T) {
	t.Parallel()
	all := instructions(t)
	last := 0
	for i, in := range all {
		if in[0] == "FROM" {
			last = i
		}
	}
	runtime := all[last:]
	has := func(kw, want string) bool {
		return slices.ContainsFunc(runtime, func(in [2]string) bool { return in[0] == kw && strings.Contains(in[1], want) })
	}
	for _, c := range []struct{ kw, want string }{
		{"USER", "65532:65532"},
		{"COPY", "--chown=65532:65532 /out/data /data"},
		{"ENV", "AGENT_WORKER_DATA_DIR=/data"},
		{"HEALTHCHECK", `/agent-worker", "health", "--api", "http://127.0.0.1:8080"]`},
		{"ENTRYPOINT", `["/usr/local/bin/agent-worker"]`},
		{"CMD", `["run"]`},
	} {
		if !has(c.kw, c.want) {
			t.Errorf("runtime stage lacks %s ... %s", c.kw, c.want)
		}
	}
}

func TestDockerignoreKeepsTheContextSmall(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	for _, want := range []string{".git", "data/", "bin/", "/agent-worker"} {
		if !slices.Contains(lines, want) {
			t.Errorf(".dockerignore lacks %q", want)
		}
	}
}

// The binary runs as the image runs it — as uid 65532, with its state in
// the directory AGENT_WORKER_DATA_DIR names and the API token from
// AGENT_WORKER_API_TOKEN — and its own health check passes. (Only the
// listen addresses differ: tests stay on 127.0.0.1 and free ports.) It
// needs root to switch users; CI runs as root.
func TestBinaryRunsAsTheImageUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs the binary as uid 65532 and needs root (CI runs as root)")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "agent-worker")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/agent-worker").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(data, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Dir(dir)} { // the user must reach data/
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := l.Addr().String()
	l.Close()
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + data, "AGENT_WORKER_DATA_DIR=" + data, "AGENT_WORKER_API_TOKEN=image-test-token"}
	cmd := exec.Command(bin, "run", "--api-listen", api, "--nats-listen", "-1")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	end := time.Now().Add(30 * time.Second)
	for {
		health := exec.Command(bin, "health", "--api", "http://"+api)
		health.Env = env
		if out, err := health.CombinedOutput(); err == nil {
			if !strings.Contains(string(out), "ready") {
				t.Fatalf("health said %q", out)
			}
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the worker never became healthy as uid 65532:\n%s", logs.String())
		}
		<-time.After(50 * time.Millisecond)
	}
	entries, err := os.ReadDir(data)
	if err != nil || len(entries) == 0 {
		t.Fatalf("no state written to AGENT_WORKER_DATA_DIR (%v): %v", err, entries)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the worker did not stop cleanly on SIGTERM: %v\n%s", err, logs.String())
	}
}
