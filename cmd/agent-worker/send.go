package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/agent-worker/agent-worker/natsbus"
)

func sendCmd(stdout io.Writer) *cobra.Command {
	var (
		deferred bool
		id, from string
		url      string
		prefix   string
		file     string
		timeout  time.Duration
	)
	c := &cobra.Command{
		Use:   "send AGENT TEXT [--deferred] [--id ID] [--nats URL]",
		Short: "Publish a message to an agent's inbox (or deferred) subject.",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			agent, text := args[0], args[1]
			if file != "" {
				cfg, err := loadConfig(file)
				if err != nil {
					return err
				}
				if !cmd.Flags().Changed("prefix") {
					prefix = cfg.NATS.SubjectPrefix
				}
				if !cmd.Flags().Changed("nats") && cfg.NATS.URL != "" {
					url = cfg.NATS.URL
				}
			}
			subjects := natsbus.Subjects{Prefix: prefix}
			subject := subjects.Inbox(agent)
			if deferred {
				subject = subjects.Deferred(agent)
			}
			body, _ := json.Marshal(map[string]string{"text": text, "id": id, "from": from})
			nc, err := nats.Connect(url, nats.Name("agent-worker send"), nats.Timeout(timeout))
			if err != nil {
				return fmt.Errorf("connect to NATS at %s: %w (is the worker running? see --nats)", url, err)
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
				msg.Header.Set(nats.MsgIdHdr, id)
			}
			ack, err := js.PublishMsg(ctx, msg)
			if err != nil {
				return fmt.Errorf("publish to %s: %w (is the agent-worker stream on this server?)", subject, err)
			}
			note := ""
			if ack.Duplicate {
				note = " (duplicate id: dropped by the stream)"
			}
			fmt.Fprintf(stdout, "sent to %s: stream %s seq %d%s\n", subject, ack.Stream, ack.Sequence, note)
			return nil
		},
	}
	f := c.Flags()
	f.BoolVar(&deferred, "deferred", false, "queue for the next turn without waking the agent")
	f.StringVar(&id, "id", "", "idempotency key (Nats-Msg-Id)")
	f.StringVar(&from, "from", "cli", "sender name shown to the agent")
	f.StringVar(&url, "nats", nats.DefaultURL, "NATS server URL")
	f.StringVar(&prefix, "prefix", "agents", "subject prefix (nats.subject_prefix)")
	f.StringVarP(&file, "config", "c", "", "read the prefix and NATS URL from this config")
	f.DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the server")
	return c
}
