// Package deploy holds no code: its test checks the Dockerfile the image
// is built from, since no container engine runs here.
package deploy

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
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
