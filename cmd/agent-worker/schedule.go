package main

import (
	"fmt"
	"net/url"
	"time"

	"github.com/agent-worker/agent-worker/control"
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
	var output string
	run := &cobra.Command{
		Use:   "run AGENT SCHEDULE [-o json]",
		Short: "Fire one of an agent's schedules now: its prompt runs in a turn as a tick would (a paused or halted agent answers why not).",
		Example: `  agent-worker schedule run oncall morning
  agent-worker schedule run oncall morning -o json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lineOutput(cmd, output); err != nil {
				return err
			}
			client, err := api.client(cmd, c.env)
			if err != nil {
				return err
			}
			path := "/v1/agents/" + url.PathEscape(args[0]) + "/schedules/" + url.PathEscape(args[1]) + "/run"
			return post(c, cmd, client, path, nil, output == "json", func(r control.ScheduleRun) {
				fmt.Fprintln(c.stdout, scheduleLine(args[0], args[1], r, time.Now()))
			})
		},
	}
	api = addAPIFlags(run, 30*time.Second)
	run.Flags().StringVarP(&output, "output", "o", "", "json: print the API's answer (default: a line)")
	root.AddCommand(run)
	return root
}
