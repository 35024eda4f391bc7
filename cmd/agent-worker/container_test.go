package main

import (
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/config"
)

const noticeText = "reachable only from inside the container; set AGENT_WORKER_API_TOKEN to a secret to serve it on 0.0.0.0:8080"

// TestRunConfigDockerDefault is `docker run IMAGE`: run without --config
// takes the embedded default from the environment — with
// AGENT_WORKER_API_TOKEN the API on 0.0.0.0:8080 behind an operate token
// read from that variable, without it loopback and no token — and
// AGENT_WORKER_DATA_DIR as data_dir. A config file ignores both.
func TestRunConfigDockerDefault(t *testing.T) {
	t.Parallel()
	withToken := &cli{env: testEnv(map[string]string{config.EnvAPIToken: "s3cret", config.EnvDataDir: "/data"})}
	cfg, err := withToken.runConfig("", overrides{})
	if err != nil {
		t.Fatal(err)
	}
	want := []config.Token{{Name: "operator", Role: "operate", ValueEnv: "AGENT_WORKER_API_TOKEN"}}
	if cfg.API.Listen != "0.0.0.0:8080" || !reflect.DeepEqual(cfg.API.Tokens, want) || cfg.DataDir != "/data" {
		t.Fatalf("with the token: listen %q tokens %+v data_dir %q", cfg.API.Listen, cfg.API.Tokens, cfg.DataDir)
	}

	cfg, err = (&cli{env: testEnv(nil)}).runConfig("", overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.API.Listen != "127.0.0.1:8080" || len(cfg.API.Tokens) != 0 || cfg.DataDir != "./data" {
		t.Fatalf("without: listen %q tokens %+v data_dir %q", cfg.API.Listen, cfg.API.Tokens, cfg.DataDir)
	}

	p := writeFile(t, "data_dir: /srv/aw\nmodels:\n  f: {provider: scripted, behaviour: demo}\nagents: [{name: a, model: f}]\n")
	cfg, err = withToken.runConfig(p, overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.API.Listen != "127.0.0.1:8080" || len(cfg.API.Tokens) != 0 || cfg.DataDir != "/srv/aw" {
		t.Fatalf("a config file: listen %q tokens %+v data_dir %q", cfg.API.Listen, cfg.API.Tokens, cfg.DataDir)
	}
}

// TestContainerNotice: the notice is for an API on loopback without a
// token, and says how to reach it from outside.
func TestContainerNotice(t *testing.T) {
	t.Parallel()
	if n := containerNotice(config.Default(), "127.0.0.1:8080"); !strings.Contains(n, "listens on 127.0.0.1:8080, "+noticeText) {
		t.Fatalf("loopback: %q", n)
	}
	if n := containerNotice(config.Default(), "[::1]:8080"); n == "" {
		t.Fatal("no notice for ::1")
	}
	withToken := config.DefaultFromEnv(testEnv(map[string]string{config.EnvAPIToken: "s3cret"}).lookup)
	for name, n := range map[string]string{
		"token":    containerNotice(withToken, "0.0.0.0:8080"),
		"0.0.0.0":  containerNotice(config.Default(), "0.0.0.0:8080"),
		"pod's IP": containerNotice(config.Default(), "10.1.2.3:8080"),
	} {
		if n != "" {
			t.Errorf("%s: %q", name, n)
		}
	}
}

// TestRunSaysWhenTheContainerHidesTheAPI runs the embedded demo with
// the container check answering yes, then no: only the first says the API
// is reachable only inside the container. AGENT_WORKER_DATA_DIR is where
// the state goes.
func TestRunSaysWhenTheContainerHidesTheAPI(t *testing.T) {
	t.Parallel()
	for _, in := range []bool{true, false} {
		dir := t.TempDir()
		env := testEnv(map[string]string{config.EnvDataDir: dir})
		env.inContainer = func() bool { return in }
		r := startCmd(t, env, "run", "--nats-listen", "-1", "--api-listen", "127.0.0.1:0")
		if in {
			eventually(t, func() bool { return strings.Contains(r.errb.String(), noticeText) }, r.logs, "no container notice")
		} else {
			r.bannerAPI(t)
		}
		if code := r.stop(t); code != exitOK {
			t.Fatalf("in a container %v: exit %d\n%s", in, code, r.logs())
		}
		if !in && strings.Contains(r.errb.String(), noticeText) {
			t.Fatalf("a container notice outside a container:\n%s", r.errb.String())
		}
		if _, err := os.Stat(filepath.Join(dir, "jetstream")); err != nil {
			t.Fatalf("no state under %s=%s: %v", config.EnvDataDir, dir, err)
		}
	}
}

// TestDockerDefaultServesWithTheToken runs the embedded default with
// AGENT_WORKER_API_TOKEN set (on a free loopback port, not 8080): the API
// wants that token, and the operator verbs work with it.
func TestDockerDefaultServesWithTheToken(t *testing.T) { // not parallel: sets the environment
	const token = "docker-operate-token-7f3e"
	t.Setenv(config.EnvAPIToken, token)
	t.Setenv(config.EnvDataDir, t.TempDir())
	env := processEnviron()
	env.inContainer = func() bool { return true }
	r := startCmd(t, env, "run", "--nats-listen", "-1", "--api-listen", "127.0.0.1:0")
	url := r.bannerAPI(t)
	wantCall(t, "GET", url+"/v1/agents", "", "", http.StatusUnauthorized)
	wantCall(t, "GET", url+"/v1/agents", token, "", http.StatusOK)
	if out, errs, code := run(env, "status", "demo", "--api", url, "--token", token); code != exitOK || !strings.Contains(out, "agent:       demo") {
		t.Fatalf("status with the token: exit %d: %s%s", code, out, errs)
	}
	if code := r.stop(t); code != exitOK {
		t.Fatalf("exit %d\n%s", code, r.logs())
	}
	if strings.Contains(r.errb.String(), noticeText) || strings.Contains(r.logs(), token) {
		t.Fatalf("a container notice with a token, or the token printed:\n%s", r.logs())
	}
}
