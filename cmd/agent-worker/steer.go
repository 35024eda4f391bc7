package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/agent-worker/agent-worker/driver"
	"github.com/spf13/cobra"
)

// steerCmd is `steer AGENT TEXT`: POST /v1/agents/AGENT/messages with
// "steer": true, printed as a line (or, with -o json, the API's JSON).
func (c *cli) steerCmd() *cobra.Command {
	var output string
	var apiF *apiFlags
	cmd := &cobra.Command{
		Use:   "steer AGENT TEXT [-o json]",
		Short: "Give the running turn an operator message before its next model call (no turn running: wake the agent with it).",
		Long: `Give an agent's running turn your message before its next model call,
as operator text (not untrusted input): a long tool loop hears it now, not
after it ends. The turn's history records it. With no turn running it wakes
the agent with the message, as resume --message would; a paused or halted
agent refuses it. Needs a token with role operate.`,
		Example: `  agent-worker steer oncall "the db-2 alert is a known migration; skip it"`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lineOutput(cmd, output); err != nil {
				return err
			}
			client, err := apiF.client(cmd, c.env)
			if err != nil {
				return err
			}
			var out driver.Steered
			raw, printed, err := c.callJSON(cmd, client, http.MethodPost, "/v1/agents/"+args[0]+"/messages", map[string]any{"text": args[1], "steer": true}, output == "json")
			if err != nil || printed {
				return err
			}
			if err := json.Unmarshal(raw, &out); err != nil {
				return err
			}
			if out.Status == "woke" {
				fmt.Fprintf(c.stdout, "%s: no turn was running; woke it with your message (%s)\n", args[0], out.ID)
				return nil
			}
			fmt.Fprintf(c.stdout, "%s: turn %d takes your message before its next model call (%s)\n", args[0], out.Turn, out.ID)
			return nil
		},
	}
	apiF = addAPIFlags(cmd, 30*time.Second)
	cmd.Flags().StringVarP(&output, "output", "o", "", "json: print the API's answer")
	return cmd
}
