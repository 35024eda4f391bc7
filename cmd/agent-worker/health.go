package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// healthCmd is `health`: the container HEALTHCHECK and the Helm test, as
// `agent-worker health --api http://HOST:PORT` (distroless images have no
// curl).
func (c *cli) healthCmd() *cobra.Command {
	var api *apiFlags
	cmd := &cobra.Command{
		Use:   "health [--api URL]",
		Short: "Ask a worker's /readyz: print ready (exit 0), or why not (exit 1).",
		Long: `Ask a worker's /readyz. Prints "ready" and exits 0, or prints
"not ready: " and the worker's reasons and exits 1. A worker that does not
answer within --timeout (default 2s) is not ready either (exit 1). /readyz
is open by default; a token (--token, --token-file, AGENT_WORKER_TOKEN) is
sent if given.`,
		Example: `  agent-worker health
  agent-worker health --api http://worker:8080 --timeout 5s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, err := api.client(cmd, c.env)
			if err != nil {
				return err
			}
			status, data, err := client.do(cmd.Context(), http.MethodGet, "/readyz", nil)
			if err != nil {
				return err
			}
			switch status {
			case http.StatusOK:
				fmt.Fprintln(c.stdout, "ready")
				return nil
			case http.StatusServiceUnavailable:
				fmt.Fprintln(c.stdout, "not ready: "+readyzReasons(data))
				return exitError{exitFailed}
			}
			return apiError(http.MethodGet, "/readyz", status, data)
		},
	}
	api = addAPIFlags(cmd, 2*time.Second)
	return cmd
}

// readyzReasons reads the reasons of a 503 from /readyz, joined by "; ".
func readyzReasons(data []byte) string {
	var body struct {
		Reasons []string `json:"reasons"`
	}
	if json.Unmarshal(data, &body) != nil || len(body.Reasons) == 0 {
		return "(the worker gave no reasons)"
	}
	return strings.Join(body.Reasons, "; ")
}
