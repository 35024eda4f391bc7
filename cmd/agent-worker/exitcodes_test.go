package main

import (
	"context"
	"net"
	"strings"
	"testing"
)

// Each class of start-up failure exits with its own code, whichever part
// met it: a bad config 2, an address to listen on that is taken 3 (the
// API's and the embedded NATS server's alike; the NATS one was 1 and the
// API one 2), a NATS server or store that does not answer 4.
func TestStartUpFailuresExitOneCodePerClass(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() })
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := gone.Addr().String()
	gone.Close() // nothing listens there now
	const agents = "models:\n  f: {provider: scripted, behaviour: demo}\nagents: [{name: a, model: f}]\n"
	for _, c := range []struct {
		name, config string
		flags        []string
		code         int
		says         string
	}{
		{"bad config", "agents: [{name: A}]\n", nil, exitConfig, "agents[0]"},
		{"api.listen taken", agents, []string{"--nats-listen", "-1", "--api-listen", taken.Addr().String()},
			exitListen, "api.listen " + taken.Addr().String() + " is already in use"},
		{"nats.listen taken", agents, []string{"--nats-listen", taken.Addr().String(), "--api-listen", "127.0.0.1:0"},
			exitListen, "nats.listen " + taken.Addr().String() + " is already in use"},
		{"nats.url unreachable", "nats: {url: \"nats://" + nobody + "\"}\n" + agents, []string{"--api-listen", "127.0.0.1:0"},
			exitUnreachable, "connect to NATS at nats://" + nobody},
		{"store unreachable", "store: {url: \"redis://" + nobody + "/0\"}\n" + agents, []string{"--nats-listen", "-1", "--api-listen", "127.0.0.1:0"},
			exitUnreachable, "redis at " + nobody},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := writeFile(t, c.config)
			var out, errb syncBuffer
			args := append([]string{"run", "--config", p, "--data-dir", t.TempDir()}, c.flags...)
			if code := execute(context.Background(), args, &out, &errb); code != c.code || !strings.Contains(errb.String(), c.says) {
				t.Fatalf("exit %d, want %d saying %q:\n%s", code, c.code, c.says, errb.String())
			}
		})
	}
}
