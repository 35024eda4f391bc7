package main

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestRunRefusesAnOpenEmbeddedNATS(t *testing.T) {
	t.Parallel()
	p := writeFile(t, "data_dir: "+t.TempDir()+"\nnats: {listen: \"0.0.0.0:"+strconv.Itoa(freeTCPPort(t))+"\"}\napi: {listen: \"127.0.0.1:0\"}\nmodels:\n  f: {provider: scripted, behaviour: demo}\nagents: [{name: a, model: f}]\n")
	for _, verb := range []string{"validate", "run"} {
		var out, errb syncBuffer
		if code := execute(context.Background(), []string{verb, "--config", p}, &out, &errb); code != exitConfig {
			t.Fatalf("%s: exit %d: %s", verb, code, errb.String())
		}
		for _, want := range []string{p + ":2: nats.listen", "without authentication", "nats.token_env"} {
			if !strings.Contains(errb.String(), want) {
				t.Fatalf("%s: stderr lacks %q:\n%s", verb, want, errb.String())
			}
		}
	}
}

func TestEmbeddedNATSBeyondLoopbackWantsItsToken(t *testing.T) { // not parallel: sets NATS_TOKEN
	t.Setenv("NATS_TOKEN", "n4ts-s3cret")
	port := freeTCPPort(t)
	p := writeFile(t, `data_dir: `+t.TempDir()+`
nats: {listen: "0.0.0.0:`+strconv.Itoa(port)+`", token_env: NATS_TOKEN}
api: {listen: "127.0.0.1:0"}
log: {level: debug}
models:
  f: {provider: scripted, behaviour: demo}
agents: [{name: ops, model: f, tools: [schedule_next_turn]}]
`)
	cfg, err := loadConfig(p, processEnviron())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan error)
	go func() { done <- serve(ctx, nil, cfg, &out, &errb) }()
	defer func() { cancel(); <-done }()
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	end := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "operator API:") {
		if time.Now().After(end) {
			t.Fatalf("the worker did not start:\n%s\n%s", out.String(), errb.String())
		}
		<-time.After(5 * time.Millisecond)
	}

	// A stranger without the token is turned away, and cannot reach the
	// control subject either.
	if nc, err := nats.Connect(url, nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Fatal("an unauthenticated client connected to the embedded NATS server")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("unauthenticated connect: %v, want an authorization error", err)
	}
	var sout, serr syncBuffer
	if code := execute(context.Background(), []string{"send", "ops", "no token", "--nats", url}, &sout, &serr); code == exitOK ||
		!strings.Contains(serr.String(), "--nats-token-env") {
		t.Fatalf("send without a token: exit %d: %s", code, serr.String())
	}

	// With the token, from the flags or from the config, send works.
	for i, args := range [][]string{
		{"send", "ops", "disk full on db-1", "--nats", url, "--nats-token-env", "NATS_TOKEN", "--id", "m-1"},
		{"send", "ops", "disk full on db-2", "--config", p, "--id", "m-2"},
	} {
		var sout, serr syncBuffer
		if code := execute(context.Background(), args, &sout, &serr); code != exitOK {
			t.Fatalf("send %d: exit %d: %s", i, code, serr.String())
		}
		if !strings.Contains(sout.String(), "sent to agents.ops.inbox") {
			t.Fatalf("send %d printed %q", i, sout.String())
		}
	}
	for _, want := range []string{`disk full on db-1`, `disk full on db-2`} {
		for !strings.Contains(errb.String(), want) {
			if time.Now().After(end) {
				t.Fatalf("the agent never saw %q:\n%s", want, errb.String())
			}
			<-time.After(5 * time.Millisecond)
		}
	}
}

func TestValidateRefusesAnOpenAPI(t *testing.T) {
	t.Parallel()
	p := writeFile(t, "data_dir: "+t.TempDir()+"\nnats: {listen: \"-1\"}\napi: {listen: \"0.0.0.0:8080\"}\nmodels:\n  f: {provider: scripted, behaviour: demo}\nagents: [{name: a, model: f}]\n")
	var out, errb syncBuffer
	if code := execute(context.Background(), []string{"validate", "--config", p}, &out, &errb); code != exitConfig {
		t.Fatalf("validate: exit %d: %s", code, errb.String())
	}
	if want := p + ":3: api.listen"; !strings.Contains(errb.String(), want) {
		t.Fatalf("stderr lacks %q:\n%s", want, errb.String())
	}
}
