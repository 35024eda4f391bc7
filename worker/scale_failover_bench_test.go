package worker

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/events"
)

// The failover: two replicas, r1 and r2, in this process on an in-process
// nats-server of their own, sharing their state there (store nats://),
// lease ttl failoverTTL, heartbeat 200ms, ack_wait 30s (which no longer
// bounds anything: a new owner reads on from the stored cursors). One
// agent, pinned to r1 (replica_affinity) so that r1 owns it; r1's model
// hangs, so a message sent to it is read into a turn that never records.
// r1 is then killed as fleet.kill does (its NATS connection closed:
// heartbeats, lease renewals and reads stop at once; nothing released),
// and the time from the kill to r2's message-handled event for that
// message is measured.

// failoverTTL is the failover replicas' lease ttl.
const failoverTTL = 3 * time.Second

// failoverScale is what the failover measured.
type failoverScale struct {
	err     string        // why it was not measured
	handled time.Duration // kill → message-handled on r2
	owned   time.Duration // kill → r2 gained the agent
}

func scaleFailover(b *testing.B, l *laps) failoverScale {
	var r failoverScale
	url := natsExternal(b)
	r1, err := startFailoverReplica(b, url, "r1", "[{hang: true}]")
	if err != nil {
		r.err = "start r1: " + err.Error()
		return r
	}
	defer stopWithin(r1, 10*time.Second)
	r2, err := startFailoverReplica(b, url, "r2", `[{text: "noted", usage: {input: 100, output: 10}}]`)
	if err != nil {
		r.err = "start r2: " + err.Error()
		return r
	}
	defer stopWithin(r2, 10*time.Second)
	a1, _ := r1.Driver().Agent("fo")
	a2, _ := r2.Driver().Agent("fo")
	if !waitUntil(30*time.Second, func() bool { return !a1.Standby() && a2.Standby() }) {
		r.err = "r1 never owned the agent with r2 standing by"
		return r
	}

	started := make(chan time.Time, 1)
	sub1 := r1.Events().Subscribe(1, func(e events.Event) bool {
		if e.Type == events.TurnStarted {
			note(started)
		}
		return false
	})
	defer sub1.Close()
	handled, owned := make(chan time.Time, 1), make(chan time.Time, 1)
	sub2 := r2.Events().Subscribe(1, func(e events.Event) bool {
		switch {
		case e.Type == events.MessageHandled && e.Data["id"] == "fo-1":
			note(handled)
		case e.Type == events.Ownership && e.Data["owned"] == true:
			note(owned)
		}
		return false
	})
	defer sub2.Close()

	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	msg := nats.NewMsg("agents.fo.inbox")
	msg.Header.Set(nats.MsgIdHdr, "fo-1")
	msg.Data = []byte("check fo-1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		r.err = "publish: " + err.Error()
		return r
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		r.err = "r1 never started the message's turn"
		return r
	}

	killed := time.Now()
	r1.NATS().NC.Close()
	wait := time.After(5*failoverTTL + 10*time.Second)
	select {
	case at := <-handled:
		r.handled = at.Sub(killed)
	case <-wait:
		r.err = fmt.Sprintf("not handled by r2 within %v of the kill", 5*failoverTTL+10*time.Second)
	}
	select {
	case at := <-owned:
		r.owned = at.Sub(killed)
	default:
	}
	l.mark("failover")
	return r
}

// startFailoverReplica starts replica holder of the failover on url with
// the model's script.
func startFailoverReplica(b *testing.B, url, holder, script string) (*Worker, error) {
	yaml := fmt.Sprintf(sealLine()+`data_dir: %s
shutdown_grace: 2s
api: {listen: "127.0.0.1:0"}
nats: {url: %q, ack_wait: 30s}
store: {url: "nats://"}
lease: {holder: %s, ttl: %v, heartbeat: 200ms}
models:
  fake:
    provider: scripted
    script: %s
    loop: true
agents:
  - {name: fo, model: fake, tools: [report_done], replica_affinity: r1}
`, b.TempDir(), url, holder, failoverTTL, script)
	return startScripted(scaleConfig(b, yaml), slog.New(slog.DiscardHandler))
}

// note sends the time on c unless c holds one already: the first time
// counts, and an event's publisher never blocks.
func note(c chan time.Time) {
	select {
	case c <- time.Now():
	default:
	}
}

// waitUntil polls cond every 10ms until it holds (true) or d passed.
func waitUntil(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
