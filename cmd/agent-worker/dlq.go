package main

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/internal/textclip"
)

// dlqCmd is `dlq list AGENT` and `dlq replay AGENT SEQ`: the agent's kept
// dead letters, over the HTTP API.
func (c *cli) dlqCmd() *cobra.Command {
	root := &cobra.Command{Use: "dlq", Short: "Read and replay an agent's dead letters (kept with JetStream).", Args: unknownSubcommand,
		Example: `  agent-worker dlq list oncall
  agent-worker dlq replay oncall 42`,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() }}
	var output string
	var limit int
	var listAPI *apiFlags
	list := &cobra.Command{
		Use:   "list AGENT [--limit N] [-o table|json]",
		Short: "List an agent's newest dead letters: seq, id, reason, age, body.",
		Example: `  agent-worker dlq list oncall
  agent-worker dlq list oncall --limit 100 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/v1/agents/" + url.PathEscape(args[0]) + "/dlq?limit=" + strconv.Itoa(limit)
			return listing(c, cmd, listAPI, output, path, func(l api.DeadLetterList) error { return writeDeadLetters(c.stdout, l, time.Now()) })
		},
	}
	list.Flags().StringVarP(&output, "output", "o", "", "table or json (default table)")
	list.Flags().IntVar(&limit, "limit", api.DefaultDeadLetterLimit, "how many of the newest to list (1 to 1000)")
	listAPI = addAPIFlags(list, 30*time.Second)

	var reason, replayOutput string
	var replayAPI *apiFlags
	replay := &cobra.Command{
		Use:   "replay AGENT SEQ [--reason R] [-o json]",
		Short: "Put a dead letter back in the agent's inbox, once (it leaves the dead-letter stream).",
		Example: `  agent-worker dlq replay oncall 42
  agent-worker dlq replay oncall 42 --reason "db is back"`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := replayAPI.client(cmd, c.env)
			if err != nil {
				return err
			}
			var body any
			if reason != "" {
				body = map[string]any{"reason": reason}
			}
			if err := lineOutput(cmd, replayOutput); err != nil {
				return err
			}
			path := "/v1/agents/" + url.PathEscape(args[0]) + "/dlq/" + url.PathEscape(args[1]) + "/replay"
			return post(c, cmd, client, path, body, replayOutput == "json", func(out replayed) {
				fmt.Fprintln(c.stdout, replayLine(args[0], args[1], out.DeadLetter))
			})
		},
	}
	replay.Flags().StringVarP(&replayOutput, "output", "o", "", "json: print the API's answer (default: a line)")
	replay.Flags().StringVar(&reason, "reason", "", "why, in your words: kept in the dead-letter-replayed event with your token's name")
	replayAPI = addAPIFlags(replay, 30*time.Second)
	root.AddCommand(list, replay)
	return root
}

// replayed is the API's answer to a replay.
type replayed struct {
	DeadLetter *natsinbox.DeadLetter `json:"dead_letter"`
}

// writeDeadLetters writes a listing as a table.
func writeDeadLetters(w io.Writer, l api.DeadLetterList, now time.Time) error {
	if len(l.DeadLetters) == 0 {
		fmt.Fprintf(w, "no dead letters kept for %s\n", l.Agent)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tID\tREASON\tAGE\tBYTES\tBODY")
	for _, d := range l.DeadLetters {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\n", d.Seq, dash(d.ID), d.Reason, shortDuration(now.Sub(d.At).Round(time.Second)), d.Bytes, textclip.Runes(oneLine(d.Body), 60, "…"))
	}
	return tw.Flush()
}
