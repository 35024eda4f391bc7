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
	var (
		deferred bool
		id, from string
		url      string
		prefix   string
		file     string
		timeout  time.Duration
		auth     config.NATS
	)
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
			if url == "" {
				url = natsFromEnv(c.env)
			}
			if file != "" {
				cfg, err := loadConfig(file, c.env)
				if err != nil {
					return err
				}
				if !cmd.Flags().Changed("prefix") {
					prefix = cfg.NATS.SubjectPrefix
				}
				if url == "" {
					url = clientURL(cfg.NATS)
				}
				if auth == (config.NATS{}) {
					auth = cfg.NATS // the worker's own credentials
				}
			}
			if url == "" {
				url = nats.DefaultURL
			}
			opts, err := natsbus.ClientAuth(auth)
			if err != nil {
				return err
			}
			subjects := natsbus.Subjects{Prefix: prefix}
			subject := subjects.Inbox(agent)
			if deferred {
				subject = subjects.Deferred(agent)
			}
			body, _ := json.Marshal(map[string]string{"text": text, "id": id, "from": from})
			nc, err := nats.Connect(url, append(opts, nats.Name("agent-worker send"), nats.Timeout(timeout))...)
			if err != nil {
				hint := "is the worker running? see --nats, $" + envNATS + ", $" + envNATSURL
				if errors.Is(err, nats.ErrAuthorization) {
					hint = "the server wants credentials: --nats-token-env, --nats-user with --nats-password-env, --nats-nkey, or --config"
				}
				return fmt.Errorf("connect to NATS at %s: %w (%s)", url, err, hint)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			msg := nats.NewMsg(subject)
			msg.Data = body
			if id != "" {
				// Per agent: the stream compares Nats-Msg-Id across agents.
				msg.Header.Set(nats.MsgIdHdr, natsbus.MsgID(agent, id))
			}
			ack, err := js.PublishMsg(ctx, msg)
			if err := natsbus.Full(err); errors.Is(err, natsbus.ErrFull) {
				return fmt.Errorf("publish to %s: %w; nothing was queued: retry once the agent has caught up", subject, err)
			}
			if err != nil {
				return fmt.Errorf("publish to %s: %w (is the agent-worker stream on this server?)", subject, err)
			}
			note := ""
			if ack.Duplicate {
				note = " (duplicate id: dropped by the stream)"
			}
			fmt.Fprintf(c.stdout, "sent to %s: stream %s seq %d%s\n", subject, ack.Stream, ack.Sequence, note)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&deferred, "deferred", false, "queue for the next turn without waking the agent")
	f.StringVar(&id, "id", "", "idempotency key, per agent (the envelope's id; Nats-Msg-Id AGENT/ID)")
	f.StringVar(&from, "from", "cli", "sender name shown to the agent")
	f.StringVar(&url, "nats", "", "NATS server URL (default: $"+envNATS+", else $"+envNATSURL+", else the config's, else "+nats.DefaultURL+")")
	f.StringVar(&prefix, "prefix", "agents", "subject prefix (nats.subject_prefix)")
	f.StringVarP(&file, "config", "c", "", "read the prefix, NATS URL and NATS credentials from this config")
	f.StringVar(&auth.TokenEnv, "nats-token-env", "", "name of the environment variable holding the NATS token")
	f.StringVar(&auth.User, "nats-user", "", "NATS user (with --nats-password-env)")
	f.StringVar(&auth.PasswordEnv, "nats-password-env", "", "name of the environment variable holding the NATS password")
	f.StringVar(&auth.NKeyFile, "nats-nkey", "", "NKey seed file")
	f.DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the server")
	return cmd
}
