package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// opsClient talks to a worker's operator API.
type opsClient struct {
	base  string
	token string
	http  *http.Client
}

// do sends a request and returns the answer's status and body (at most
// 1 MiB). Only a request that gets no answer is an error.
func (c opsClient) do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.base, "/")+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w (is the worker running? see --api)", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp.StatusCode, data, nil
}

// call sends a request and decodes the JSON answer into out (if non-nil).
// A 4xx/5xx answer becomes an error carrying the API's message.
func (c opsClient) call(ctx context.Context, method, path string, body any, out any) error {
	status, data, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	if status >= 400 {
		return apiError(method, path, status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// apiError is the error for an HTTP error answer, with the API's message
// when it sent one.
func apiError(method, path string, status int, data []byte) error {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		return fmt.Errorf("%s %s: %s (HTTP %d)", method, path, e.Error, status)
	}
	return fmt.Errorf("%s %s: HTTP %d", method, path, status)
}

// Environment variables of the API verbs; the flags win over them.
const (
	envAPI   = "AGENT_WORKER_API"   // the worker's API URL (--api)
	envToken = "AGENT_WORKER_TOKEN" // the bearer token (--token, --token-file)
)

// defaultAPI is the API URL without --api or AGENT_WORKER_API: the
// default api.listen.
const defaultAPI = "http://127.0.0.1:8080"

// apiFlags are the flags every API verb has: where the API is, the token,
// how long to wait.
type apiFlags struct {
	url, token, tokenFile string
	timeout               time.Duration
}

// addAPIFlags adds the API flags to cmd, with timeout as --timeout's
// default.
func addAPIFlags(cmd *cobra.Command, timeout time.Duration) *apiFlags {
	f := &apiFlags{}
	fs := cmd.Flags()
	fs.StringVar(&f.url, "api", "", "the worker's API URL (default: $"+envAPI+", else "+defaultAPI+")")
	fs.StringVar(&f.token, "token", "", "bearer token (visible to other users in the process list: prefer --token-file or $"+envToken+")")
	fs.StringVar(&f.tokenFile, "token-file", "", "read the bearer token from this file (default: $"+envToken+")")
	fs.DurationVar(&f.timeout, "timeout", timeout, "how long to wait for the API")
	return f
}

// client returns a client for the flags: --api, else AGENT_WORKER_API,
// else the default URL; --token, else --token-file, else
// AGENT_WORKER_TOKEN. Giving both --token and --token-file, or a token
// file that cannot be read or is empty, is an error for exit code 2.
func (f *apiFlags) client(cmd *cobra.Command, env environ) (opsClient, error) {
	base := f.url
	if base == "" {
		base = env.get(envAPI)
	}
	if base == "" {
		base = defaultAPI
	}
	token := f.token
	switch {
	case f.token != "" && f.tokenFile != "":
		return opsClient{}, usageError(cmd, errors.New("give --token or --token-file, not both"))
	case f.tokenFile != "":
		data, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return opsClient{}, configError{fmt.Errorf("--token-file: %w", err)}
		}
		if token = strings.TrimSpace(string(data)); token == "" {
			return opsClient{}, configError{fmt.Errorf("--token-file %s: the file is empty", f.tokenFile)}
		}
	case token == "":
		token = strings.TrimSpace(env.get(envToken))
	}
	return opsClient{base: base, token: token, http: &http.Client{Timeout: f.timeout}}, nil
}

// printJSON writes v indented, as the verbs print the API's answers.
func printJSON(w io.Writer, v any) {
	data, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(w, string(data))
}

// opsCmds are the operator verbs that change an agent, over the HTTP
// API; status and health have their own files.
func (c *cli) opsCmds() []*cobra.Command {
	// verb is POST /v1/agents/AGENT/<name> with body's answer.
	verb := func(name, short string, body func() any) *cobra.Command {
		var api *apiFlags
		cmd := &cobra.Command{
			Use:   name + " AGENT",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				client, err := api.client(cmd, c.env)
				if err != nil {
					return err
				}
				var out map[string]any
				if err := client.call(cmd.Context(), http.MethodPost, "/v1/agents/"+args[0]+"/"+name, body(), &out); err != nil {
					return err
				}
				printJSON(c.stdout, out)
				return nil
			},
		}
		api = addAPIFlags(cmd, 30*time.Second)
		return cmd
	}

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
	var resetAPI *apiFlags
	reset := &cobra.Command{
		Use:   "reset AGENT GUARDRAIL [--add-budget USD]",
		Short: "Reset a tripped guardrail (turn_usd, session_usd, daily_usd, worker_daily_usd, watchdog).",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := resetAPI.client(cmd, c.env)
			if err != nil {
				return err
			}
			var out map[string]any
			body := map[string]any{"guardrail": args[1], "add_budget_usd": addBudget}
			if err := client.call(cmd.Context(), http.MethodPost, "/v1/agents/"+args[0]+"/guardrails/reset", body, &out); err != nil {
				return err
			}
			printJSON(c.stdout, out)
			return nil
		},
	}
	resetAPI = addAPIFlags(reset, 30*time.Second)
	reset.Flags().Float64Var(&addBudget, "add-budget", 0, "USD to add to the ceiling (spend is never lowered)")

	return []*cobra.Command{
		verb("pause", "Pause an agent: no turns; messages stay queued.", func() any { return nil }),
		resume,
		interrupt,
		verb("wake", "Wake an agent for a turn now.", func() any { return nil }),
		reset,
	}
}
