package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/natsbus"
)

// clientURL is where a client on this machine reaches the worker's NATS:
// its external server, or the embedded one's listen address (a wildcard
// host is reached on loopback).
func clientURL(n config.NATS) string {
	if n.URL != "" {
		return n.URL
	}
	host, port, err := net.SplitHostPort(n.Listen)
	if err != nil || n.Listen == "-1" {
		return nats.DefaultURL
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "nats://" + net.JoinHostPort(host, port)
}

// Environment variables of send, in this order when --nats is not given.
const (
	envNATS    = "AGENT_WORKER_NATS" // the NATS URL send publishes to
	envNATSURL = "NATS_URL"          // the nats CLI's variable, read after ours
)

// natsFromEnv is the NATS URL the environment gives: AGENT_WORKER_NATS,
// else NATS_URL, else "".
func natsFromEnv(env environ) string {
	if u := env.get(envNATS); u != "" {
		return u
	}
	return env.get(envNATSURL)
}

// sendCmd is `send`: publish a message to an agent over NATS.
func (c *cli) sendCmd() *cobra.Command {
	f := &sendFlags{}
	cmd := &cobra.Command{
		Use:   "send AGENT TEXT [--deferred] [--id ID] [--nats URL]",
		Short: "Publish a message to an agent's inbox (or deferred) subject.",
		Long: `Publish a message to an agent's inbox subject (or, with --deferred, its
deferred subject) over NATS, and print the stream's sequence.

The NATS server is --nats, else $` + envNATS + `, else $` + envNATSURL + ` (the
nats CLI's variable), else the NATS of --config, else ` + nats.DefaultURL + `.
--config also gives the subject prefix and the worker's NATS credentials.`,
		Example: `  agent-worker send oncall "disk 91% on db-2" --nats nats://127.0.0.1:4222
  agent-worker send oncall "weekly report due" --deferred --id report-2026-w18
  agent-worker send oncall "check the backups" --config worker.yaml`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			agent, text := args[0], args[1]
			if err := f.resolve(cmd, c.env); err != nil {
				return err
			}
			subjects := natsbus.Subjects{Prefix: f.prefix}
			subject := subjects.Inbox(agent)
			if f.deferred {
				subject = subjects.Deferred(agent)
			}
			body, _ := json.Marshal(map[string]string{"text": text, "id": f.id, "from": f.from})
			nc, err := connectNATS(f.url, f.auth, f.timeout)
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			ack, err := publishMessage(ctx, nc, subject, agent, f.id, body)
			if err != nil {
				return err
			}
			note := ""
			if ack.Duplicate {
				note = " (duplicate id: dropped by the stream)"
			}
			fmt.Fprintf(c.stdout, "sent to %s: stream %s seq %d%s\n", subject, ack.Stream, ack.Sequence, note)
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

// sendFlags are send's flags. resolve fills in what they leave out, from
// the environment and --config, in place.
type sendFlags struct {
	deferred bool
	id, from string
	url      string
	prefix   string
	file     string
	timeout  time.Duration
	auth     config.NATS
}

// register adds the flags to cmd.
func (f *sendFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.BoolVar(&f.deferred, "deferred", false, "queue for the next turn without waking the agent")
	fs.StringVar(&f.id, "id", "", "idempotency key, per agent (the envelope's id; Nats-Msg-Id AGENT/ID)")
	fs.StringVar(&f.from, "from", "cli", "sender name shown to the agent")
	fs.StringVar(&f.url, "nats", "", "NATS server URL (default: $"+envNATS+", else $"+envNATSURL+", else the config's, else "+nats.DefaultURL+")")
	fs.StringVar(&f.prefix, "prefix", "agents", "subject prefix (nats.subject_prefix)")
	fs.StringVarP(&f.file, "config", "c", "", "read the prefix, NATS URL and NATS credentials from this config")
	fs.StringVar(&f.auth.TokenEnv, "nats-token-env", "", "name of the environment variable holding the NATS token")
	fs.StringVar(&f.auth.User, "nats-user", "", "NATS user (with --nats-password-env)")
	fs.StringVar(&f.auth.PasswordEnv, "nats-password-env", "", "name of the environment variable holding the NATS password")
	fs.StringVar(&f.auth.NKeyFile, "nats-nkey", "", "NKey seed file")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Second, "how long to wait for the server")
}

// resolve settles where send publishes, in the order the help gives: the
// URL from --nats, the environment, --config, else NATS's default; the
// prefix and credentials from --config unless given as flags, so a send
// with only --config reaches the worker as the worker itself does.
func (f *sendFlags) resolve(cmd *cobra.Command, env environ) error {
	if f.url == "" {
		f.url = natsFromEnv(env)
	}
	if f.file != "" {
		cfg, err := loadConfig(f.file, env)
		if err != nil {
			return err
		}
		if !cmd.Flags().Changed("prefix") {
			f.prefix = cfg.NATS.SubjectPrefix
		}
		if f.url == "" {
			f.url = clientURL(cfg.NATS)
		}
		if f.auth == (config.NATS{}) {
			f.auth = cfg.NATS // the worker's own credentials
		}
	}
	if f.url == "" {
		f.url = nats.DefaultURL
	}
	return nil
}

// connectNATS connects send to url with auth's credentials. Its error
// says what to check: credentials when the server refused them, else
// where the URL came from.
func connectNATS(url string, auth config.NATS, timeout time.Duration) (*nats.Conn, error) {
	opts, err := natsbus.ClientAuth(auth)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(url, append(opts, nats.Name("agent-worker send"), nats.Timeout(timeout))...)
	if err != nil {
		hint := "is the worker running? see --nats, $" + envNATS + ", $" + envNATSURL
		if errors.Is(err, nats.ErrAuthorization) {
			hint = "the server wants credentials: --nats-token-env, --nats-user with --nats-password-env, --nats-nkey, or --config"
		}
		return nil, fmt.Errorf("connect to NATS at %s: %w (%s)", url, err, hint)
	}
	return nc, nil
}

// publishMessage publishes body to subject through JetStream, with id
// (when given) as the message id the stream deduplicates on. A full
// stream is told apart, because then nothing was queued and a retry
// later succeeds.
func publishMessage(ctx context.Context, nc *nats.Conn, subject, agent, id string, body []byte) (*jetstream.PubAck, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(subject)
	msg.Data = body
	if id != "" {
		// Per agent: the stream compares Nats-Msg-Id across agents.
		msg.Header.Set(nats.MsgIdHdr, natsbus.MsgID(agent, id))
	}
	ack, err := js.PublishMsg(ctx, msg)
	if err := natsbus.Full(err); errors.Is(err, natsbus.ErrFull) {
		return nil, fmt.Errorf("publish to %s: %w; nothing was queued: retry once the agent has caught up", subject, err)
	}
	if err != nil {
		return nil, fmt.Errorf("publish to %s: %w (is the agent-worker stream on this server?)", subject, err)
	}
	return ack, nil
}
