package main

import (
	"net"
	"strings"
	"testing"
)

// closedNATS is a NATS URL on a port nothing listens on: a connect to it
// fails at once, naming the URL.
func closedNATS(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "nats://" + addr
}

// TestSendReadsTheNATSURLFromTheEnvironment: without --nats, send connects
// to $AGENT_WORKER_NATS, else $NATS_URL (the nats CLI's); --nats wins over
// both. The failed connect names the URL it tried. On the old code send
// ignored both variables and tried nats://127.0.0.1:4222.
func TestSendReadsTheNATSURLFromTheEnvironment(t *testing.T) {
	t.Parallel()
	ours, theirs, flag := closedNATS(t), closedNATS(t), closedNATS(t)
	for _, c := range []struct {
		name string
		vars map[string]string
		args []string
		want string
	}{
		{"both set: ours first", map[string]string{envNATS: ours, envNATSURL: theirs}, nil, ours},
		{"NATS_URL only", map[string]string{envNATSURL: theirs}, nil, theirs},
		{"--nats wins", map[string]string{envNATS: ours, envNATSURL: theirs}, []string{"--nats", flag}, flag},
	} {
		args := append([]string{"send", "oncall", "hello", "--timeout", "2s"}, c.args...)
		_, errs, code := run(testEnv(c.vars), args...)
		if code == exitOK || !strings.Contains(errs, "connect to NATS at "+c.want+":") {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant a connect error naming %s", c.name, code, errs, c.want)
		}
	}
}
