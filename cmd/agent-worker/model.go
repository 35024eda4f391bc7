package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/models"
)

// modelCmd is `model AGENT NAME [--effort E]` and `model AGENT --reset`:
// POST /v1/agents/AGENT/model, printed as a line (or, with -o json, the
// API's JSON).
func (c *cli) modelCmd() *cobra.Command {
	var effort, reason, output string
	var reset bool
	var apiF *apiFlags
	cmd := &cobra.Command{
		Use:   "model AGENT (NAME [--effort low|medium|high] | --reset)",
		Short: "Switch a live agent to another configured model (or effort) from its next model call, or back to its configured model.",
		Long: `Switch a live agent to another configured model from its next model call,
without a restart: NAME is a key of the config's models:. --effort sets its
reasoning effort (not for scripted models); --reset goes back to the model
(and effort) the config gives the agent.

The switch is stored with the agent's state: it survives restarts and
changes of owner, and a config reload keeps it while the model is still
configured. Responses are priced at the new model's price. It is audited
with your token's name and --reason.`,
		Example: `  agent-worker model oncall smart --effort high --reason "hard incident"
  agent-worker model oncall --reset`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case reset && len(args) == 2:
				return usageError(cmd, errors.New("give a model NAME or --reset, not both"))
			case !reset && len(args) == 1:
				return usageError(cmd, errors.New("give a model NAME (a key of the config's models:), or --reset"))
			case reset && effort != "":
				return usageError(cmd, errors.New("--effort goes with a model NAME; --reset goes back to the configured effort too"))
			case effort != "" && !slices.Contains(models.ReasoningEfforts, effort):
				return usageError(cmd, fmt.Errorf("--effort %q: want one of %s", effort, strings.Join(models.ReasoningEfforts, ", ")))
			}
			if err := lineOutput(cmd, output); err != nil {
				return err
			}
			client, err := apiF.client(cmd, c.env)
			if err != nil {
				return err
			}
			body := map[string]any{"model": nil}
			if !reset {
				body["model"] = args[1]
			}
			if effort != "" {
				body["reasoning_effort"] = effort
			}
			if reason != "" {
				body["reason"] = reason
			}
			return post(c, cmd, client, "/v1/agents/"+args[0]+"/model", body, output == "json", func(v driver.ModelView) {
				writeModel(c.stdout, args[0], v, time.Now())
			})
		},
	}
	cmd.Flags().StringVar(&effort, "effort", "", "reasoning effort of the model: low, medium or high (default: the model's own)")
	cmd.Flags().BoolVar(&reset, "reset", false, "go back to the model and effort the config gives the agent")
	cmd.Flags().StringVar(&reason, "reason", "", "why, in your words: kept in the model-switched event and the stored switch with your token's name")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json prints the API's answer (default: a line)")
	apiF = addAPIFlags(cmd, 30*time.Second)
	return cmd
}

// writeModel writes the model in force after a switch as a line.
func writeModel(w io.Writer, agent string, v driver.ModelView, now time.Time) {
	if !v.Switched {
		fmt.Fprintf(w, "%s: on its configured model %s (%s) from its next model call\n", agent, v.ConfiguredName, v.Configured)
		return
	}
	fmt.Fprintf(w, "%s: %s; configured %s (%s); its next model call uses it\n", agent, modelSwitchText(v, now), v.ConfiguredName, v.Configured)
}

// modelSwitchText says which model a switched agent runs on, since when
// and by whom: "model o4-mini (backup), reasoning effort high, switched
// now by ops: provider incident".
func modelSwitchText(v driver.ModelView, now time.Time) string {
	s := "model " + v.ActiveName + " (" + v.Active + ")"
	if v.ReasoningEffort != "" {
		s += ", reasoning effort " + v.ReasoningEffort
	}
	if v.Since != nil {
		s += ", switched " + relTime(*v.Since, now)
	}
	if v.By != "" {
		s += " by " + v.By
	}
	if v.Reason != "" {
		s += ": " + oneLine(v.Reason)
	}
	return s
}

// modelColumn is status -o wide's MODEL: the model in force, marked when
// an operator switched it ("o4-mini (switched)").
func modelColumn(a api.AgentView) string {
	if m := a.ModelSwitch; m != nil && m.Switched {
		return m.ActiveName + " (switched)"
	}
	return dash(a.Model)
}
