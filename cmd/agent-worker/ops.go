package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/guard"
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
	if status == http.StatusUnauthorized {
		return fmt.Errorf("%w; %s", apiError(method, path, status, data), c.authHint())
	}
	if status >= 400 {
		return apiError(method, path, status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// authHint says, after a 401, where the CLI takes a token from: none was
// sent, or the one sent was refused.
func (c opsClient) authHint() string {
	if c.token == "" {
		return "no token was sent: give the API's token with --token-file FILE or $" + envToken + " (--token works too, but shows in the process list)"
	}
	return "the API refused the token sent: check the one in --token-file, $" + envToken + " or --token"
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
	url, token, tokenFile, config string
	timeout                       time.Duration
}

// addAPIFlags adds the API flags to cmd, with timeout as --timeout's
// default.
func addAPIFlags(cmd *cobra.Command, timeout time.Duration) *apiFlags {
	f := &apiFlags{}
	fs := cmd.Flags()
	fs.StringVar(&f.url, "api", "", "the worker's API URL (default: $"+envAPI+", else from --config, else "+defaultAPI+")")
	fs.StringVarP(&f.config, "config", "c", "", "the worker's config file: its api.listen is the API URL when --api and $"+envAPI+" are not set")
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
	if base == "" && f.config != "" {
		cfg, err := loadConfig(f.config, env)
		if err != nil {
			return opsClient{}, err
		}
		base = listenURL(cfg.API.Listen)
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

// listenURL is the URL of an API listening on listen: a wildcard host is
// reached on loopback.
func listenURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// printJSON writes v indented, as the verbs print the API's answers.
func printJSON(w io.Writer, v any) {
	data, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(w, string(data))
}

// opsCmds are the operator verbs that change an agent, over the HTTP
// API, and inbox, which lists what a resume would run; status and health
// have their own files. Every verb takes --reason, which the worker keeps
// in the verb's event (and a pause's record) with the caller's token name.
func (c *cli) opsCmds() []*cobra.Command {
	return []*cobra.Command{
		c.agentVerbCmd("pause", "Pause an agent: no turns; messages stay queued.",
			`  agent-worker pause oncall --reason "db migration"
  agent-worker pause oncall --api http://worker:8080 --token-file ~/.agent-worker-token`, noBody, alwaysHold),
		c.resumeCmd(),
		c.interruptCmd(),
		c.agentVerbCmd("wake", "Wake an agent for a turn now.",
			`  agent-worker wake oncall
  agent-worker wake oncall --reason "check the nightly backup now"`, noBody, alwaysHold),
		c.resetCmd(),
		c.inboxCmd(),
	}
}

// noBody is the body of a verb that has no fields besides --reason.
func noBody() map[string]any { return nil }

// alwaysHold is the hold of the verbs other than interrupt, which have
// no --no-hold; verbLine reads hold for interrupt only.
func alwaysHold() bool { return true }

// agentVerbCmd is POST /v1/agents/AGENT/<name> with body's fields and
// --reason, printed as a line (verbLine, told hold()) or, with -o json,
// the API's answer. body and hold are called when the command runs, so
// they see the verb's own flags.
func (c *cli) agentVerbCmd(name, short, example string, body func() map[string]any, hold func() bool) *cobra.Command {
	var api *apiFlags
	var reason, output string
	cmd := &cobra.Command{
		Use:     name + " AGENT [-o json]",
		Short:   short,
		Example: example,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := api.client(cmd, c.env)
			if err != nil {
				return err
			}
			fields := body()
			if reason != "" {
				if fields == nil {
					fields = map[string]any{}
				}
				fields["reason"] = reason
			}
			var send any
			if fields != nil {
				send = fields
			}
			if err := lineOutput(cmd, output); err != nil {
				return err
			}
			return post(c, cmd, client, "/v1/agents/"+args[0]+"/"+name, send, output == "json", func(reply control.Reply) {
				fmt.Fprintln(c.stdout, verbLine(args[0], name, reason, hold(), reply))
			})
		},
	}
	api = addAPIFlags(cmd, 30*time.Second)
	cmd.Flags().StringVarP(&output, "output", "o", "", "json: print the API's answer (default: a line)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, in your words: kept in the event with your token's name (and, for pause, shown by status)")
	return cmd
}

// resumeCmd is `resume AGENT`: one turn with what is queued, optionally
// with an instruction (--message) or after dropping the queue
// (--drop-queued). The body carries only the fields given, so a plain
// resume sends none.
func (c *cli) resumeCmd() *cobra.Command {
	var message string
	var dropQueued bool
	cmd := c.agentVerbCmd("resume", "Resume a paused agent: one turn with everything queued (or, with --drop-queued, nothing queued); an agent that is not paused is refused (exit 1, HTTP 409 with its state).",
		`  agent-worker resume oncall
  agent-worker resume oncall --message "the migration is done; re-check db-2"
  agent-worker resume oncall --drop-queued --reason "stale alerts"`, func() map[string]any {
			var body map[string]any
			if message != "" {
				body = map[string]any{"message": message}
			}
			if dropQueued {
				if body == nil {
					body = map[string]any{}
				}
				body["drop_queued"] = true
			}
			return body
		}, alwaysHold)
	cmd.Flags().StringVar(&message, "message", "", "an instruction for the resumed turn")
	cmd.Flags().BoolVar(&dropQueued, "drop-queued", false, "abandon every queued message first: each is dead-lettered with reason operator_dropped; the answer's \"dropped\" counts them")
	return cmd
}

// interruptCmd is `interrupt AGENT`: cancel the running turn and, unless
// --no-hold, pause. Its body always carries hold, false with --no-hold.
func (c *cli) interruptCmd() *cobra.Command {
	var noHold bool
	cmd := c.agentVerbCmd("interrupt", "Cancel the running turn and pause (unless --no-hold).",
		`  agent-worker interrupt oncall --reason "runaway tool loop"
  agent-worker interrupt oncall --no-hold`, func() map[string]any {
			return map[string]any{"hold": !noHold}
		}, func() bool { return !noHold })
	cmd.Flags().BoolVar(&noHold, "no-hold", false, "cancel the turn but do not pause")
	return cmd
}

// resetCmd is `reset AGENT GUARDRAIL`: reset a tripped guardrail, with
// --add-budget raising its ceiling, printed as a line (resetLine) or,
// with -o json, the API's answer.
func (c *cli) resetCmd() *cobra.Command {
	var addBudget float64
	var resetReason, resetOutput string
	var resetAPI *apiFlags
	reset := &cobra.Command{
		Use:   "reset AGENT GUARDRAIL [--add-budget USD] [-o json]",
		Short: "Reset a tripped guardrail (turn_usd, session_usd, daily_usd, worker_daily_usd, watchdog).",
		Long: `Reset a tripped guardrail (turn_usd, session_usd, daily_usd, worker_daily_usd, watchdog).

Spend is never lowered: --add-budget raises the ceiling. A reset that would
trip again at once is refused (exit 1, HTTP 409) with what is spent, the
ceiling, and the budget that is missing.`,
		Example: `  agent-worker reset oncall watchdog
  agent-worker reset oncall daily_usd --add-budget 2 --reason "incident 4711"`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lineOutput(cmd, resetOutput); err != nil {
				return err
			}
			client, err := resetAPI.client(cmd, c.env)
			if err != nil {
				return err
			}
			body := map[string]any{"guardrail": args[1], "add_budget_usd": addBudget}
			if resetReason != "" {
				body["reason"] = resetReason
			}
			path := "/v1/agents/" + args[0] + "/guardrails/reset"
			return post(c, cmd, client, path, body, resetOutput == "json", func(r guard.ResetResult) {
				fmt.Fprintln(c.stdout, resetLine(args[0], r))
			})
		},
	}
	resetAPI = addAPIFlags(reset, 30*time.Second)
	reset.Flags().StringVarP(&resetOutput, "output", "o", "", "json: print the API's answer (default: a line)")
	reset.Flags().Float64Var(&addBudget, "add-budget", 0, "USD to add to the ceiling (spend is never lowered)")
	reset.Flags().StringVar(&resetReason, "reason", "", "why, in your words: kept in the guardrail-reset event with your token's name")
	return reset
}

// inboxCmd is `inbox AGENT`: the messages queued on the agent's owner, a
// table (oldest first) or, with -o json, the API's JSON.
func (c *cli) inboxCmd() *cobra.Command {
	var output string
	var apiF *apiFlags
	cmd := &cobra.Command{
		Use:   "inbox AGENT [-o table|json]",
		Short: "List an agent's queued messages: id, kind, source, size, age.",
		Example: `  agent-worker inbox oncall
  agent-worker inbox oncall -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return listing(c, cmd, apiF, output, "/v1/agents/"+args[0]+"/inbox", func(in control.Inbox) error { return writeInbox(c.stdout, in) })
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "table or json (default table)")
	apiF = addAPIFlags(cmd, 30*time.Second)
	return cmd
}

// writeInbox writes a listing as a line of counts and a table.
func writeInbox(w io.Writer, in control.Inbox) error {
	fmt.Fprintf(w, "%s on %s: %d pending of %d, %d deferred\n", in.Agent, dash(in.Owner), in.Pending, in.Cap, in.Deferred)
	if len(in.Messages) == 0 {
		fmt.Fprintln(w, "no queued messages")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSOURCE\tFROM\tBYTES\tAGE\tATTEMPTS")
	for _, m := range in.Messages {
		age := shortDuration(time.Duration(m.AgeSeconds * float64(time.Second)).Round(time.Second))
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\n", dash(m.ID), m.Kind, dash(m.Source), dash(m.From), m.SizeBytes, age, m.Attempts)
	}
	return tw.Flush()
}
