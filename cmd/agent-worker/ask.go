package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/money"
)

// askTimeout is ask's default --timeout: the owner gives the model 60 s
// (driver.DefaultAskTimeout), and a forward a little more.
const askTimeout = 90 * time.Second

// askCmd is `ask AGENT QUESTION...`: POST /v1/agents/AGENT/ask. It prints
// the answer's text on stdout and what it cost on stderr (or, with -o
// json, the API's JSON on stdout).
func (c *cli) askCmd() *cobra.Command {
	var output string
	var apiF *apiFlags
	cmd := &cobra.Command{
		Use:   "ask AGENT QUESTION... [-o json]",
		Short: "Ask a running agent a side question: one model call on its current context, no turn, nothing added to its history.",
		Long: `Ask a running agent a question about its work ("why did you page me?",
"what are you waiting for?"). Its owner answers with one model call on the
agent's instruction, memory and recent turns: no turn runs, no tool is
called, and nothing is added to its history. Asking works while the agent
sleeps, is paused or runs a turn; not while a guardrail halts it.

The call is charged to the agent's budgets and audited with your token's
name. The words after AGENT are the question.`,
		Example: `  agent-worker ask oncall why did you page me
  agent-worker ask oncall "what are you waiting for?" -o json`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" {
				return usageError(cmd, fmt.Errorf("-o %q: want json (default: the answer's text)", output))
			}
			client, err := apiF.client(cmd, c.env)
			if err != nil {
				return err
			}
			question := strings.Join(args[1:], " ")
			return post(c, cmd, client, "/v1/agents/"+args[0]+"/ask", map[string]any{"question": question}, output == "json", func(ans control.AskAnswer) {
				writeAnswer(c, ans)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json: print the API's answer (default: the answer's text, its cost on stderr)")
	apiF = addAPIFlags(cmd, askTimeout)
	return cmd
}

// writeAnswer prints the answer's text on stdout, and on stderr what it
// cost and the tool calls the model asked for that were not run.
func writeAnswer(c *cli, ans control.AskAnswer) {
	if text := strings.TrimRight(ans.Text, "\n"); text != "" {
		fmt.Fprintln(c.stdout, text)
	} else {
		fmt.Fprintln(c.stderr, "(the model answered with no text)")
	}
	if len(ans.NotRun) > 0 {
		fmt.Fprintf(c.stderr, "(the model asked to call %s: not run)\n", strings.Join(ans.NotRun, ", "))
	}
	fmt.Fprintf(c.stderr, "— %s on %s: %d tokens in, %d out, %s\n", ans.Model, dash(ans.Owner), ans.TokensIn, ans.TokensOut, money.USD(ans.CostUSD))
}
