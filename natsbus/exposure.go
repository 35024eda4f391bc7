package natsbus

import (
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/config"
)

// Exposure is what a client without credentials can do on the worker's
// NATS that only the worker should: each entry names one thing ("read the
// state bucket agent-worker-state"). Empty: nothing found.
type Exposure []string

// probeName is the probe connection's name: the server's log lines about
// what it refused are the probe's findings, not an intruder's.
const probeName = "agent-worker exposure probe"

// probeWait bounds how long a probe waits for an answer that a denied
// request never gets: the server's refusal arrives before the flush's.
const probeWait = 2 * time.Second

// ProbeAnonymous connects to the worker's server once more, without
// credentials (with the configured CA, so that TLS is no obstacle), and
// tries what a publisher must not be able to: read the state bucket
// (when the state lives in JetStream KV: bucket non-empty), watch it, read
// the control requests (and the tokens they carry) and the worker's own
// replies. It changes nothing. A server that refuses the connection
// exposes nothing; an error is returned only when the probe could not be
// made for another reason.
func (c *Conn) ProbeAnonymous(cfg config.NATS, bucket string) (Exposure, error) {
	opts := []nats.Option{nats.Name(probeName), nats.Timeout(5 * time.Second),
		nats.MaxReconnects(0), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}
	if c.server != nil {
		opts = append(opts, nats.InProcessServer(c.server))
	} else if cfg.TLS.CAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.TLS.CAFile))
	}
	nc, err := nats.Connect(c.ClientURL, opts...)
	if errors.Is(err, nats.ErrAuthorization) || (err != nil && strings.Contains(strings.ToLower(err.Error()), "authorization")) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	prefix := cfg.SubjectPrefix
	var out Exposure
	if bucket != "" {
		if directGetAllowed(nc, "$JS.API.DIRECT.GET.KV_"+bucket, `{"last_by_subj":"$KV.`+bucket+`.lease.probe"}`) {
			out = append(out, "read the state bucket "+bucket+" ($JS.API.DIRECT.GET.KV_"+bucket+")")
		}
		if subscribeAllowed(nc, "$KV."+bucket+".>") {
			out = append(out, "watch the state bucket "+bucket+" ($KV."+bucket+".>)")
		}
	}
	if subscribeAllowed(nc, prefix+".*.control") {
		out = append(out, "read the control requests and the tokens they carry ("+prefix+".*.control)")
	}
	if subscribeAllowed(nc, InboxPrefix+".>") {
		out = append(out, "read the worker's own replies, its state reads among them ("+InboxPrefix+".>)")
	}
	return out, nil
}

// subscribeAllowed reports whether the server lets nc subscribe to
// subject: a refusal comes back before the flush's answer.
func subscribeAllowed(nc *nats.Conn, subject string) bool {
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		return false
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		return false
	}
	return !deniedLast(nc, subject)
}

// directGetAllowed reports whether a request on subject gets an answer
// (any answer but "no responders": the stream answered) rather than a
// permission refusal.
func directGetAllowed(nc *nats.Conn, subject, body string) bool {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return false
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, []byte(body)); err != nil {
		return false
	}
	if err := nc.Flush(); err != nil || deniedLast(nc, subject) {
		return false
	}
	m, err := sub.NextMsg(probeWait)
	if err != nil {
		return false
	}
	return m.Header.Get("Status") != "503" // 503: no responders, no such stream
}

// deniedLast reports whether nc's last error is the server's refusal of
// subject.
func deniedLast(nc *nats.Conn, subject string) bool {
	err := nc.LastError()
	return err != nil && errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+subject+`"`)
}
