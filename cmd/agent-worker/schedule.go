package main

import (
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"
)

// scheduleCmd is `schedule run AGENT SCHEDULE`: fire one of an agent's
// schedules now, over the HTTP API (POST
// /v1/agents/AGENT/schedules/SCHEDULE/run).
func (c *cli) scheduleCmd() *cobra.Command {
	root := &cobra.Command{Use: "schedule", Short: "Work with an agent's schedules.", Args: unknownSubcommand,
		Example: `  agent-worker schedule run oncall morning`,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() }}
	var api *apiFlags
	run := &cobra.Command{
		Use:     "run AGENT SCHEDULE",
		Short:   "Fire one of an agent's schedules now: its prompt runs in a turn as a tick would (a paused or halted agent answers why not).",
		Example: `  agent-worker schedule run oncall morning`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := api.client(cmd, c.env)
			if err != nil {
				return err
			}
			var out map[string]any
			path := "/v1/agents/" + url.PathEscape(args[0]) + "/schedules/" + url.PathEscape(args[1]) + "/run"
			if err := client.call(cmd.Context(), http.MethodPost, path, nil, &out); err != nil {
				return err
			}
			printJSON(c.stdout, out)
			return nil
		},
	}
	api = addAPIFlags(run, 30*time.Second)
	root.AddCommand(run)
	return root
}
