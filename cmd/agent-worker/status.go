package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/money"
)

// statusFormats are status's -o values. Without -o, the list is a table
// and one agent a block of "key: value" lines.
var statusFormats = []string{"table", "json", "wide"}

// statusCmd is `status [AGENT]`.
func (c *cli) statusCmd() *cobra.Command {
	var output string
	var apiF *apiFlags
	cmd := &cobra.Command{
		Use:   "status [AGENT] [-o table|json|wide]",
		Short: "Show agents: state, next wake, queues, spend.",
		Long: `Show agents: state, next wake, queues, spend.

Without AGENT, a table of every agent (-o table, the default); -o wide adds
the next wake's cause and reason, what a waiting agent waits for, the
throttle, turns, failed turns, spend against the session and daily
ceilings and the model; -o json prints the API's JSON.

With AGENT, a block of "key: value" lines: state, owner, why (a paused
agent: by whom, since when and the reason given), next wake, inbox, last
turn, guardrails; -o table, wide or json as for the list.

Every agent is shown as the replica that owns it sees it (OWNER), whichever
replica --api reaches; an agent no replica owns right now shows state
"unknown" and why.

Times are relative ("in 20s", "3m ago"), absolute too in the block.`,
		Example: `  agent-worker status
  agent-worker status oncall
  agent-worker status -o wide --api http://worker:8080 --token-file ~/.agent-worker-token`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && !slices.Contains(statusFormats, output) {
				return usageError(cmd, fmt.Errorf("-o %q: want one of %s", output, strings.Join(statusFormats, ", ")))
			}
			client, err := apiF.client(cmd, c.env)
			if err != nil {
				return err
			}
			path := "/v1/agents"
			if len(args) == 1 {
				path += "/" + args[0]
			}
			raw, printed, err := c.getJSON(cmd, client, path, output == "json")
			if err != nil || printed {
				return err
			}
			var agents []api.AgentView
			if len(args) == 1 {
				var one api.AgentView
				if err := json.Unmarshal(raw, &one); err != nil {
					return fmt.Errorf("GET %s: %w", path, err)
				}
				if output == "" {
					writeBlock(c.stdout, one, time.Now())
					return nil
				}
				agents = []api.AgentView{one}
			} else {
				var list struct {
					Agents []api.AgentView `json:"agents"`
				}
				if err := json.Unmarshal(raw, &list); err != nil {
					return fmt.Errorf("GET %s: %w", path, err)
				}
				agents = list.Agents
			}
			return writeTable(c.stdout, agents, output == "wide", time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "table, wide or json (default: table for the list, a block for one agent)")
	apiF = addAPIFlags(cmd, 30*time.Second)
	return cmd
}

// writeTable writes agents as a table; wide adds columns.
func writeTable(w io.Writer, agents []api.AgentView, wide bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"AGENT", "STATE", "OWNER", "NEXT WAKE", "INBOX", "DEFERRED", "SPEND TODAY", "CEILING", "LEFT", "LAST TURN"}
	if wide {
		head = []string{"AGENT", "STATE", "OWNER", "NEXT WAKE", "CAUSE", "REASON", "WAITING FOR", "THROTTLED", "TURNS", "FAILED",
			"INBOX", "DEFERRED", "SESSION USD", "DAILY USD", "MODEL", "LAST TURN"}
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, a := range agents {
		next := "-"
		if a.NextWake != nil {
			next = relTime(*a.NextWake, now)
		}
		last := "-"
		if t := a.LastTurn; t != nil {
			last = t.Outcome + " " + relTime(t.Started, now)
		}
		spend, ceiling, left := spendColumns(a.Guardrails)
		row := []string{a.Name, a.State, dash(a.Owner), next, fmt.Sprint(a.InboxPending), fmt.Sprint(a.DeferredPending), spend, ceiling, left, last}
		if wide {
			cause := a.NextWakeCause
			if a.NextWakeSchedule != "" {
				cause += ":" + a.NextWakeSchedule
			}
			throttled := "-"
			if a.ThrottledUntil != nil {
				throttled = a.ThrottledBy + " " + relTime(*a.ThrottledUntil, now)
			}
			session, daily := "-", "-"
			if g := a.Guardrails; g != nil {
				session, daily = spendCell(g.Session), spendCell(g.Daily)
			}
			row = []string{a.Name, a.State, dash(a.Owner), next, dash(cause), dash(a.NextWakeReason), dash(a.WaitingFor), throttled,
				fmt.Sprint(a.Turns), fmt.Sprint(a.FailedTurns), fmt.Sprint(a.InboxPending), fmt.Sprint(a.DeferredPending),
				session, daily, modelColumn(a), last}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// writeBlock writes one agent as "key: value" lines for a person, its
// absolute times in now's location (the local zone for time.Now()).
func writeBlock(w io.Writer, a api.AgentView, now time.Time) {
	line := func(key, value string) { fmt.Fprintf(w, "%-12s %s\n", key+":", value) }
	more := func(value string) { fmt.Fprintf(w, "%-12s %s\n", "", value) }

	line("agent", a.Name)
	line("state", a.State)
	owner := dash(a.Owner)
	if a.ServedBy != "" {
		owner += " (served by " + a.ServedBy + ")"
	}
	line("owner", owner)
	line("why", why(a, now))
	if a.NextWake != nil {
		line("next wake", wakeText(a, now))
	} else {
		line("next wake", "none armed")
	}
	for i, s := range a.Schedules {
		v := s.Name + " off"
		if s.NextFire != nil {
			v = fireText(s, now)
			if s.Skipped {
				v += ", skipped: the agent is " + map[bool]string{true: "paused", false: "halted"}[a.Paused]
			}
		}
		if i == 0 {
			line("schedules", v)
		} else {
			more(v)
		}
	}
	inbox := fmt.Sprintf("%d pending of %d, %d deferred, %d wake(s) pending", a.InboxPending, a.InboxCap, a.DeferredPending, a.PendingWakes)
	if a.LogWaiting > 0 {
		inbox += fmt.Sprintf(", %d more in the log", a.LogWaiting)
	}
	line("inbox", inbox)
	if t := a.LastTurn; t != nil {
		d := time.Duration(t.DurationSeconds * float64(time.Second)).Round(time.Millisecond)
		line("last turn", fmt.Sprintf("#%d %s %s (%s), took %s", t.N, t.Outcome, relTime(t.Started, now), absTime(t.Started, now.Location()), d))
		more(fmt.Sprintf("%d model call(s), %d tool call(s), %d message(s), tokens %d in / %d out, %s",
			t.ModelCalls, t.ToolCalls, t.Messages, t.TokensIn, t.TokensOut, money.USD(t.CostUSD)))
		if t.Error != "" {
			more("error: " + oneLine(t.Error))
		}
		if t.Text != "" {
			more("said: " + oneLine(t.Text))
		}
	} else {
		line("last turn", "none yet")
	}
	if g := a.Guardrails; g != nil {
		line("guardrails", fmt.Sprintf("turn %s, session %s, daily %s, worker daily %s",
			spendOf(g.Turn), spendOf(g.Session), spendOf(g.Daily), spendOf(g.WorkerDaily)))
		if !g.Priced {
			more("unpriced: model " + g.Model + " has no price, its spend counts as $0 and no cost ceiling can bind")
		}
		if tr := g.Trip; tr != nil {
			more(fmt.Sprintf("tripped: %s %s (%s): %s", tr.Guardrail, relTime(tr.At, now), absTime(tr.At, now.Location()), tr.Reason))
			if lift := liftText(g, now); lift != "" {
				more(lift)
			}
		}
	} else {
		line("guardrails", "none")
	}
	line("turns", fmt.Sprintf("%d (model %s)", a.Turns, dash(a.Model)))
	if m := a.ModelSwitch; m != nil && m.Switched {
		line("model", modelSwitchText(*m, now)+"; configured "+m.ConfiguredName+" ("+m.Configured+")")
	}
}

// why says in words why the agent is in its state, or what holds it.
func why(a api.AgentView, now time.Time) string {
	var r []string
	if a.Error != "" {
		r = append(r, a.Error)
	}
	if a.HaltReason != "" {
		r = append(r, a.HaltReason)
	}
	if a.Standby {
		r = append(r, "another replica holds its lease and runs it")
	}
	if a.Paused {
		r = append(r, pausedWhy(a, now)+"; messages stay queued until resume")
	}
	if a.WaitingFor != "" {
		r = append(r, "waiting for "+a.WaitingFor+"; it runs by itself once that is back")
	}
	if a.LogWaiting > 0 {
		r = append(r, fmt.Sprintf("%d more message(s) wait in the input log beyond its inbox cap; they come in later turns", a.LogWaiting))
	}
	if a.ThrottledUntil != nil {
		r = append(r, "held back by "+dash(a.ThrottledBy)+" (next turn "+relTime(*a.ThrottledUntil, now)+")")
	}
	if a.FailedTurns > 0 {
		r = append(r, fmt.Sprintf("%d failed turn(s) in a row; retries back off", a.FailedTurns))
	}
	if len(r) == 0 {
		switch a.State {
		case "sleeping":
			r = append(r, "sleeping until the next wake or a message")
		case "running":
			r = append(r, "running a turn")
		default:
			r = append(r, "-")
		}
	}
	return strings.Join(r, "; ")
}

// pausedWhy says who paused the agent, since when and why: "paused by
// ops 3m ago (2026-05-04 10:00:00 UTC): db migration". A pause from before
// the worker kept who and why reads "paused by an operator".
func pausedWhy(a api.AgentView, now time.Time) string {
	s := "paused by " + a.PausedBy
	if a.PausedBy == "" {
		s = "paused by an operator"
	}
	if a.PausedSince != nil {
		s += " " + relTime(*a.PausedSince, now) + " (" + absTime(*a.PausedSince, now.Location()) + ")"
	}
	if a.PauseReason != "" {
		s += ": " + oneLine(a.PauseReason)
	}
	return s
}

// relTime says when t is relative to now: "now", "in 20s", "3m ago",
// "in 2h5m", "1d3h ago".
func relTime(t, now time.Time) string {
	d := t.Sub(now).Round(time.Second)
	switch {
	case d == 0:
		return "now"
	case d > 0:
		return "in " + shortDuration(d)
	default:
		return shortDuration(-d) + " ago"
	}
}

// shortDuration writes d in at most two units, the larger first: 45s, 3m,
// 2h5m, 1d3h.
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	}
	days, h := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour)
	if h == 0 {
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd%dh", days, h)
}

// spendOf writes spend against a ceiling: "$0.12 of $5", or "$0.12 (no
// ceiling)".
func spendOf(c guard.Ceiling) string {
	if c.CeilingUSD == 0 {
		return money.USD(c.SpentUSD) + " (no ceiling)"
	}
	return money.USD(c.SpentUSD) + " of " + money.USD(c.CeilingUSD)
}

// spendCell writes spend against a ceiling for a table: "0.12/5", "0.12/-".
// spendColumns are the status table's SPEND TODAY, CEILING and LEFT: today's
// spend, and the binding ceiling — the daily one, else the session one
// (marked) — with what remains of it; an unpriced model's ceilings cannot
// bind, and say so.
func spendColumns(g *guard.Status) (spend, ceiling, left string) {
	if g == nil {
		return "-", "-", "-"
	}
	if !g.Priced {
		return "$0 (unpriced)", "cannot bind", "-"
	}
	spend = money.USD(g.Daily.SpentUSD)
	c, what := g.Daily, ""
	if c.CeilingUSD == 0 {
		c, what = g.Session, " session"
	}
	if c.CeilingUSD == 0 || c.RemainingUSD == nil {
		return spend, "-", "-"
	}
	return spend, money.USD(c.CeilingUSD) + what, money.USD(*c.RemainingUSD)
}

func spendCell(c guard.Ceiling) string {
	ceiling := "-"
	if c.CeilingUSD != 0 {
		ceiling = strings.TrimPrefix(money.USD(c.CeilingUSD), "$")
	}
	return strings.TrimPrefix(money.USD(c.SpentUSD), "$") + "/" + ceiling
}

// dash is s, or "-" for nothing.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine folds s onto one line for the block view.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// listing is a listing verb's body: -o checked (table or json), GET path
// from the API of flags, and the answer printed as indented JSON or
// decoded into a T and written as a table by write.
func listing[T any](c *cli, cmd *cobra.Command, flags *apiFlags, output, path string, write func(T) error) error {
	if output != "" && output != "table" && output != "json" {
		return usageError(cmd, fmt.Errorf("-o %q: want table or json", output))
	}
	client, err := flags.client(cmd, c.env)
	if err != nil {
		return err
	}
	raw, printed, err := c.getJSON(cmd, client, path, output == "json")
	if err != nil || printed {
		return err
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return write(v)
}

// lineOutput checks the -o of a verb whose answer is a line by default:
// none, or json for the API's answer as it came.
func lineOutput(cmd *cobra.Command, output string) error {
	if output != "" && output != "json" {
		return usageError(cmd, fmt.Errorf("-o %q: want json (default: a line)", output))
	}
	return nil
}

// post is an action verb's call: POST body (nil: none) to path through
// client, then, with print, the answer printed as indented JSON;
// otherwise the answer decoded into a T and handed to write.
func post[T any](c *cli, cmd *cobra.Command, client opsClient, path string, body any, print bool, write func(T)) error {
	raw, printed, err := c.callJSON(cmd, client, http.MethodPost, path, body, print)
	if err != nil || printed {
		return err
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	write(v)
	return nil
}

// getJSON GETs path from the API: callJSON without a body.
func (c *cli) getJSON(cmd *cobra.Command, client opsClient, path string, print bool) (raw json.RawMessage, printed bool, err error) {
	return c.callJSON(cmd, client, http.MethodGet, path, nil, print)
}

// callJSON sends method path with body (nil: none) to the API. With
// print it writes the answer indented to stdout and reports printed;
// otherwise it returns it.
func (c *cli) callJSON(cmd *cobra.Command, client opsClient, method, path string, body any, print bool) (raw json.RawMessage, printed bool, err error) {
	if err := client.call(cmd.Context(), method, path, body, &raw); err != nil {
		return nil, false, err
	}
	if !print {
		return raw, false, nil
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return nil, false, err
	}
	fmt.Fprintln(c.stdout, b.String())
	return nil, true, nil
}
