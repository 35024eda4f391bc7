package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// publishTimeout bounds the retries of one message: longer than any
// outage a scenario causes, shorter than the stream's 2-minute duplicate
// window, so every retry of an id is deduplicated by the stream.
const publishTimeout = 60 * time.Second

// publisher publishes numbered messages to agents through JetStream and
// remembers, in order, the ids JetStream acknowledged. Each message has
// its id as Nats-Msg-Id and in the body; a publish is retried with the
// same id until acked, so a retry after a lost ack is stored once by the
// stream and counted once here.
type publisher struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	prefix string // scenario prefix of every id, e.g. "s3"

	mu    sync.Mutex
	n     map[string]int // kind → last number used
	acked []string
	sent  map[string]sentMsg // id → when JetStream acked it, and to whom
}

// sentMsg is one acked message: when JetStream acknowledged it (the
// harness clock) and the agent it was for.
type sentMsg struct {
	at    time.Time
	agent string
}

// newPublisher connects to url. The connection reconnects forever and
// buffers nothing while disconnected, so a publish during an outage fails
// at once and is retried rather than sent later behind the harness's back.
func newPublisher(url, prefix string) (*publisher, error) {
	nc, err := nats.Connect(url, nats.Name("chaos publisher"), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond), nats.ReconnectBufSize(-1),
		nats.RetryOnFailedConnect(true), nats.Timeout(time.Second))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &publisher{nc: nc, js: js, prefix: prefix, n: map[string]int{}, sent: map[string]sentMsg{}}, nil
}

func (p *publisher) close() { p.nc.Close() }

// message is one message to publish.
type message struct {
	agent    string
	deferred bool
	pad      int    // bytes of filler added to the text
	subject  string // instead of the agent's inbox or deferred subject
}

// publish sends m and returns its id once JetStream acked it, retrying
// every 100ms for up to publishTimeout. kind is the id's letter: s3-m0042.
func (p *publisher) publish(ctx context.Context, kind string, m message) (string, error) {
	p.mu.Lock()
	p.n[kind]++
	id := fmt.Sprintf("%s-%s%04d", p.prefix, kind, p.n[kind])
	p.mu.Unlock()

	subject := "agents." + m.agent + ".inbox"
	if m.deferred {
		subject = "agents." + m.agent + ".deferred"
	}
	if m.subject != "" {
		subject = m.subject
	}
	text := "chaos message " + id
	if m.pad > 0 {
		text += " " + strings.Repeat("x", m.pad)
	}
	body, err := json.Marshal(map[string]string{"text": text, "id": id})
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	var last error
	for {
		msg := nats.NewMsg(subject)
		msg.Data = body
		msg.Header.Set(nats.MsgIdHdr, id)
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := p.js.PublishMsg(actx, msg)
		acancel()
		if err == nil {
			p.took(id, m.agent)
			return id, nil
		}
		last = err
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return "", fmt.Errorf("publish %s: not acked within %v: %w (last error: %v)", id, publishTimeout, err, last)
		}
	}
}

// steady publishes n messages in the background, one every interval,
// round-robin over agents. The returned channel yields nil when all are
// acked, or the first error.
func (p *publisher) steady(ctx context.Context, n int, interval time.Duration, agents []string) <-chan error {
	return p.load(ctx, n, nil, interval, agents)
}

// until publishes like steady, but until stop is closed: the returned
// channel yields nil once the message being published then is acked.
func (p *publisher) until(ctx context.Context, stop <-chan struct{}, interval time.Duration, agents []string) <-chan error {
	return p.load(ctx, -1, stop, interval, agents)
}

// load publishes n messages (n < 0: any number) in the background, one
// every interval, round-robin over agents, until stop (nil: never) is
// closed.
func (p *publisher) load(ctx context.Context, n int, stop <-chan struct{}, interval time.Duration, agents []string) <-chan error {
	done := make(chan error, 1)
	go func() {
		for i := 0; n < 0 || i < n; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := p.publish(ctx, "m", message{agent: agents[i%len(agents)]}); err != nil {
				done <- err
				return
			}
			if err := sleep(ctx, interval); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}

// took counts id, for agent, as published now: JetStream acked it, or
// the API accepted it.
func (p *publisher) took(id, agent string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.acked = append(p.acked, id)
	p.sent[id] = sentMsg{at: time.Now(), agent: agent}
}

// sentAt returns when JetStream acked id and the agent it was for.
func (p *publisher) sentAt(id string) (sentMsg, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.sent[id]
	return s, ok
}

// ids returns the acked ids so far, in order.
func (p *publisher) ids() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.acked...)
}

// post sends one message for agent through a worker's API (POST
// /v1/agents/{name}/messages with an id), retrying every 100 ms for up to
// publishTimeout, and counts it as the publisher's once the API accepted
// it (202: the input stream has it).
func (p *publisher) post(ctx context.Context, api, agent string) (string, error) {
	p.mu.Lock()
	p.n["p"]++
	id := fmt.Sprintf("%s-p%05d", p.prefix, p.n["p"])
	p.mu.Unlock()
	body, err := json.Marshal(map[string]string{"text": "chaos message " + id, "id": id})
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+"/v1/agents/"+agent+"/messages", bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := postClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				p.took(id, agent)
				return id, nil
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		last = err
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return "", fmt.Errorf("post %s: not accepted within %v: %w (last error: %v)", id, publishTimeout, err, last)
		}
	}
}

// postClient posts to a starved worker's API: a slow answer is waited
// for, not retried at once (a retry is the same id, so it is one message
// anyway).
var postClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}}
