package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-worker/agent-worker/approval"
	"github.com/agent-worker/agent-worker/internal/textclip"
)

// approvalCmds are `approvals AGENT` (the pending approvals) and `approve
// AGENT ID` / `deny AGENT ID`, over the HTTP API.
func (c *cli) approvalCmds() []*cobra.Command {
	var output string
	var listAPI *apiFlags
	list := &cobra.Command{
		Use:   "approvals AGENT [-o table|json]",
		Short: "List an agent's tool calls waiting for an operator's approval.",
		Example: `  agent-worker approvals oncall
  agent-worker approvals oncall -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output == "json" {
				return c.printApprovals(cmd, listAPI, args[0])
			}
			return listing(c, cmd, listAPI, output, "/v1/agents/"+args[0]+"/approvals", func(pending []approval.Request) error {
				return writeApprovals(c.stdout, pending, time.Now())
			})
		},
	}
	list.Flags().StringVarP(&output, "output", "o", "", "table or json (default table)")
	listAPI = addAPIFlags(list, 30*time.Second)

	decide := func(verb, short, example string) *cobra.Command {
		var api *apiFlags
		var reason, output string
		cmd := &cobra.Command{
			Use:     verb + " AGENT ID [-o json]",
			Short:   short,
			Example: example,
			Args:    cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := lineOutput(cmd, output); err != nil {
					return err
				}
				client, err := api.client(cmd, c.env)
				if err != nil {
					return err
				}
				var body any
				if reason != "" {
					body = map[string]any{"reason": reason}
				}
				path := "/v1/agents/" + args[0] + "/approvals/" + args[1] + "/" + verb
				return post(c, cmd, client, path, body, output == "json", func(d approvalDecision) {
					fmt.Fprintln(c.stdout, decisionLine(args[0], reason, d))
				})
			},
		}
		api = addAPIFlags(cmd, 30*time.Second)
		cmd.Flags().StringVarP(&output, "output", "o", "", "json: print the API's answer (default: a line)")
		cmd.Flags().StringVar(&reason, "reason", "", "why, in your words: kept in the approval-decided event with your token's name, and told to the agent")
		return cmd
	}
	return []*cobra.Command{
		list,
		decide("approve", "Approve a held tool call: it runs with its stored arguments and the agent is woken with its result.",
			`  agent-worker approve oncall 01HZX4K2
  agent-worker approve oncall 01HZX4K2 --reason "restart is safe now"`),
		decide("deny", "Deny a held tool call: it is never run, and the agent is told.",
			`  agent-worker deny oncall 01HZX4K2 --reason "not during business hours"`),
	}
}

// approvalList is what approvals -o json prints: an object naming the
// agent, as the other lists (inbox, dlq list, status) are, around the
// API's array of pending approvals ([] when there are none).
type approvalList struct {
	Agent     string          `json:"agent"`
	Approvals json.RawMessage `json:"approvals"`
}

// printApprovals prints agent's pending approvals as an approvalList, each
// as the API sent it.
func (c *cli) printApprovals(cmd *cobra.Command, flags *apiFlags, agent string) error {
	client, err := flags.client(cmd, c.env)
	if err != nil {
		return err
	}
	path := "/v1/agents/" + agent + "/approvals"
	raw, _, err := c.getJSON(cmd, client, path, false)
	if err != nil {
		return err
	}
	var pending []json.RawMessage
	if err := json.Unmarshal(raw, &pending); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if pending == nil {
		raw = json.RawMessage("[]")
	}
	printJSON(c.stdout, approvalList{Agent: agent, Approvals: raw})
	return nil
}

// writeApprovals writes pending approvals as a table.
func writeApprovals(w io.Writer, pending []approval.Request, now time.Time) error {
	if len(pending) == 0 {
		fmt.Fprintln(w, "no pending approvals")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCALL\tTURN\tWAITING\tEXPIRES IN")
	for _, r := range pending {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.ID, textclip.Runes(approval.Describe(r), 80, "…"), r.Turn,
			shortDuration(now.Sub(r.Requested).Round(time.Second)), shortDuration(r.Expires.Sub(now).Round(time.Second)))
	}
	return tw.Flush()
}
