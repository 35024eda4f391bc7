package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// opsClient talks to a worker's operator API.
type opsClient struct {
	base  string
	token string
	http  *http.Client
}

// call sends a request and decodes the JSON answer into out (if non-nil).
// A 4xx/5xx answer becomes an error carrying the API's message.
func (c opsClient) call(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.base, "/")+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w (is the worker running? see --api)", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 400 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s %s: %s (HTTP %d)", method, path, e.Error, resp.StatusCode)
		}
		return fmt.Errorf("%s %s: HTTP %d", method, path, resp.StatusCode)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// opsCmds are the operator verbs over the HTTP API.
func opsCmds(stdout io.Writer) []*cobra.Command {
	var api string
	client := func() opsClient {
		return opsClient{base: api, token: os.Getenv("AGENT_WORKER_TOKEN"), http: &http.Client{Timeout: 30 * time.Second}}
	}
	addFlags := func(c *cobra.Command) *cobra.Command {
		c.Flags().StringVar(&api, "api", "http://127.0.0.1:8080", "the worker's API URL (token from AGENT_WORKER_TOKEN)")
		return c
	}
	printJSON := func(v any) {
		data, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintln(stdout, string(data))
	}
	verb := func(name, short string, body func() any) *cobra.Command {
		return addFlags(&cobra.Command{
			Use:   name + " AGENT",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				var out map[string]any
				if err := client().call(cmd.Context(), http.MethodPost, "/v1/agents/"+args[0]+"/"+name, body(), &out); err != nil {
					return err
				}
				printJSON(out)
				return nil
			},
		})
	}

	status := addFlags(&cobra.Command{
		Use:   "status [AGENT]",
		Short: "Show agents: state, next wake, queues, spend.",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				var out map[string]any
				if err := client().call(cmd.Context(), http.MethodGet, "/v1/agents/"+args[0], nil, &out); err != nil {
					return err
				}
				printJSON(out)
				return nil
			}
			var out struct {
				Agents []map[string]any `json:"agents"`
			}
			if err := client().call(cmd.Context(), http.MethodGet, "/v1/agents", nil, &out); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "AGENT\tSTATE\tNEXT WAKE\tINBOX\tDEFERRED\tLAST TURN")
			for _, a := range out.Agents {
				fmt.Fprintf(tw, "%v\t%v\t%v\t%v\t%v\t%v\n", a["name"], a["state"], orNone(a["next_wake"]), a["inbox_pending"], a["deferred_pending"], lastTurn(a["last_turn"]))
			}
			return tw.Flush()
		},
	})

	var message string
	resume := verb("resume", "Resume a paused agent: one turn with everything queued.", func() any {
		if message == "" {
			return nil
		}
		return map[string]string{"message": message}
	})
	resume.Flags().StringVar(&message, "message", "", "an instruction for the resumed turn")

	var noHold bool
	interrupt := verb("interrupt", "Cancel the running turn and pause (unless --no-hold).", func() any {
		return map[string]bool{"hold": !noHold}
	})
	interrupt.Flags().BoolVar(&noHold, "no-hold", false, "cancel the turn but do not pause")

	var addBudget float64
	reset := addFlags(&cobra.Command{
		Use:   "reset AGENT GUARDRAIL [--add-budget USD]",
		Short: "Reset a tripped guardrail (turn_usd, session_usd, daily_usd, worker_daily_usd, watchdog).",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out map[string]any
			body := map[string]any{"guardrail": args[1], "add_budget_usd": addBudget}
			if err := client().call(cmd.Context(), http.MethodPost, "/v1/agents/"+args[0]+"/guardrails/reset", body, &out); err != nil {
				return err
			}
			printJSON(out)
			return nil
		},
	})
	reset.Flags().Float64Var(&addBudget, "add-budget", 0, "USD to add to the ceiling (spend is never lowered)")

	return []*cobra.Command{
		status,
		verb("pause", "Pause an agent: no turns; messages stay queued.", func() any { return nil }),
		resume,
		interrupt,
		verb("wake", "Wake an agent for a turn now.", func() any { return nil }),
		reset,
	}
}

func orNone(v any) any {
	if v == nil {
		return "-"
	}
	return v
}

func lastTurn(v any) string {
	t, ok := v.(map[string]any)
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%v %v", t["outcome"], t["started"])
}
