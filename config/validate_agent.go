package config

import (
	"math"
	pathpkg "path"
	"slices"
	"strings"

	"github.com/agent-worker/agent-worker/natsbus/subject"
	"github.com/agent-worker/agent-worker/tools/urlprefix"
)

// MaxHistoryTurns bounds turn.history_turns.
const MaxHistoryTurns = 64

// agents checks that there is at least one agent, that no two share a
// name, and each agent.
func (v *validator) agents(c *Config) {
	var root path
	if len(c.Agents) == 0 {
		v.at(root.key("agents"), "at least one agent is required")
	}
	seen := map[string]int{}
	for i := range c.Agents {
		p := root.key("agents").index(i)
		a := &c.Agents[i]
		if first, dup := seen[a.Name]; dup && a.Name != "" {
			v.at(p.key("name"), "duplicate agent name %q (also agents[%d])", a.Name, first)
		} else {
			seen[a.Name] = i
		}
		v.agent(c, p, a)
	}
}

func (v *validator) agent(c *Config, p path, a *Agent) {
	v.agentModel(c, p, a)
	v.agentTools(c, p, a)
	v.agentSubscribe(c, p, a)

	names := map[string]int{}
	for i, s := range a.Schedules {
		v.schedule(p.key("schedules").index(i), s, names, i)
	}

	v.sleep(p.key("sleep"), a.Sleep)

	bp := p.key("budgets")
	v.nonNegative(bp.key("turn_usd"), a.Budgets.TurnUSD)
	v.nonNegative(bp.key("session_usd"), a.Budgets.SessionUSD)
	v.nonNegative(bp.key("daily_usd"), a.Budgets.DailyUSD)

	v.oneOf(p.key("watchdog", "mode"), a.Watchdog.Mode, watchdogModes)
	v.atLeastOne(p.key("inbox", "cap"), a.Inbox.Cap)
	v.turn(p.key("turn"), a.Turn)
	v.agentSubagents(c, p, a)
	v.watchdog(p.key("watchdog"), a.Watchdog)
	v.limits(p.key("limits"), a.Limits)
	v.atLeastOne(p.key("turn", "history_turns"), a.Turn.HistoryTurns)
	if a.Turn.HistoryTurns > MaxHistoryTurns {
		v.at(p.key("turn", "history_turns"), "must be at most %d (the NATS KV store keeps %d revisions of a list); got %d", MaxHistoryTurns, MaxHistoryTurns, a.Turn.HistoryTurns)
	}
}

// agentModel checks an agent's name, its model (a key of models) and its
// replica_affinity glob.
func (v *validator) agentModel(c *Config, p path, a *Agent) {
	switch {
	case a.Name == "":
		v.at(p.key("name"), "required")
	case !namePattern.MatchString(a.Name):
		v.at(p.key("name"), "%q must match %s: agent names are NATS subject tokens", a.Name, namePattern)
	}

	switch _, ok := c.Models[a.Model]; {
	case a.Model == "":
		v.at(p.key("model"), "required: a key of models")
	case !ok && len(c.Models) == 0:
		v.at(p.key("model"), "unknown model %q: no models are defined", a.Model)
	case !ok:
		v.at(p.key("model"), "unknown model %q (models: %s)", a.Model, strings.Join(sortedKeys(c.Models), ", "))
	}

	if a.ReplicaAffinity != "" {
		if _, err := pathpkg.Match(a.ReplicaAffinity, ""); err != nil {
			v.at(p.key("replica_affinity"), "bad glob %q: %v", a.ReplicaAffinity, err)
		}
	}
}

// agentTools checks an agent's built-in tools and what they may reach:
// the subjects it publishes to and the URL prefixes http_get reads.
func (v *validator) agentTools(c *Config, p path, a *Agent) {
	for i, t := range a.Tools {
		switch {
		case !slices.Contains(KnownTools, t):
			v.at(p.key("tools").index(i), "unknown tool %q (known: %s)", t, strings.Join(KnownTools, ", "))
		case slices.Index(a.Tools, t) < i:
			v.at(p.key("tools").index(i), "tool %q is listed twice", t)
		}
	}
	for i, s := range a.Publish {
		v.subject(p.key("publish").index(i), s)
		v.publishable(c, p.key("publish").index(i), s)
	}
	for i, u := range a.HTTPGet {
		// The tool's own normaliser: what validate accepts, run accepts.
		if _, err := urlprefix.ParsePrefixes([]string{u}); err != nil {
			v.at(p.key("http_get").index(i), "%v", err)
		}
	}
	if slices.Contains(a.Tools, "http_get") && len(a.HTTPGet) == 0 {
		v.at(p.key("tools"), "http_get needs http_get: the URL prefixes it may read")
	}
}

// agentSubscribe checks an agent's subscribe: entries: a subject outside
// the prefix routed by agent name, a known mode, and no two overlapping.
func (v *validator) agentSubscribe(c *Config, p path, a *Agent) {
	for i, s := range a.Subscribe {
		sp := p.key("subscribe").index(i)
		v.subject(sp.key("subject"), s.Subject)
		v.oneOf(sp.key("mode"), s.Mode, subscribeModes)
		if pre := c.NATS.SubjectPrefix + "."; c.NATS.SubjectPrefix != "" && (strings.HasPrefix(s.Subject, pre) || s.Subject == ">") {
			v.at(sp.key("subject"), "%q is under nats.subject_prefix %q, whose subjects are routed by agent name; publish to %s%s.inbox or .deferred instead", s.Subject, c.NATS.SubjectPrefix, pre, a.Name)
		}
		for j, o := range a.Subscribe[:i] {
			if s.Subject != "" && o.Subject != "" && subject.Overlap(s.Subject, o.Subject) {
				v.at(sp.key("subject"), "%q overlaps subscribe[%d] %q: a message on both would reach the agent twice; make them disjoint", s.Subject, j, o.Subject)
			}
		}
	}
}

// sleep checks an agent's sleep bounds (sp is its sleep key): min <=
// default <= max.
func (v *validator) sleep(sp path, s Sleep) {
	v.duration(sp.key("min"), s.Min)
	v.duration(sp.key("default"), s.Default)
	v.duration(sp.key("max"), s.Max)
	switch {
	case s.Min > s.Max:
		v.at(sp.key("min"), "min %s is above max %s", s.Min, s.Max)
	case s.Default > 0 && s.Default < s.Min:
		v.at(sp.key("default"), "default %s is below min %s", s.Default, s.Min)
	case s.Default > s.Max:
		v.at(sp.key("default"), "default %s is above max %s", s.Default, s.Max)
	}
}

// turn checks an agent's turn bounds and retry backoff (p is its turn
// key); history_turns is checked last, by agent.
func (v *validator) turn(p path, t Turn) {
	v.duration(p.key("timeout"), t.Timeout)
	v.duration(p.key("coalesce"), t.Coalesce)
	v.atLeastOne(p.key("max_per_wake"), t.MaxPerWake)
	if t.MaxInputBytes < 0 {
		v.at(p.key("max_input_bytes"), "must not be negative; got %d", t.MaxInputBytes)
	}
	v.duration(p.key("resume_within"), t.ResumeWithin)
	v.duration(p.key("retry", "base"), t.Retry.Base)
	v.duration(p.key("retry", "max"), t.Retry.Max)
	if t.Retry.Base > t.Retry.Max {
		v.at(p.key("retry", "base"), "base %s is above max %s", t.Retry.Base, t.Retry.Max)
	}
}

// agentSubagents checks an agent's subagents: bounds, a known model, and
// no spawning from a subagent.
func (v *validator) agentSubagents(c *Config, p path, a *Agent) {
	if a.Subagents.Max < 0 || a.Subagents.Depth < 0 || a.Subagents.BudgetUSD < 0 {
		v.at(p.key("subagents"), "max, depth and budget_usd must not be negative")
	}
	if math.IsNaN(a.Subagents.BudgetUSD) || math.IsInf(a.Subagents.BudgetUSD, 0) {
		v.at(p.key("subagents", "budget_usd"), "must be a finite number; got %v", a.Subagents.BudgetUSD)
	}
	v.duration(p.key("subagents", "timeout"), a.Subagents.Timeout)
	if a.Subagents.Model != "" {
		if _, ok := c.Models[a.Subagents.Model]; !ok {
			v.at(p.key("subagents", "model"), "unknown model %q", a.Subagents.Model)
		}
	}
	if slices.Contains(a.Tools, "spawn_subagent") && slices.Contains(a.Subagents.Tools, "spawn_subagent") {
		v.at(p.key("subagents", "tools"), "subagents cannot spawn subagents (depth 1)")
	}
}

// watchdog checks an agent's watchdog counts (p is its watchdog key; the
// mode is checked by agent).
func (v *validator) watchdog(p path, w Watchdog) {
	for _, f := range []struct {
		key string
		n   int
	}{
		{"repeat", w.Repeat}, {"cycle_repeats", w.CycleRepeats}, {"dominant", w.Dominant},
		{"window", w.Window}, {"failures", w.Failures}, {"turn_repeat", w.TurnRepeat},
	} {
		if f.n < 0 {
			v.at(p.key(f.key), "must not be negative; got %d", f.n)
		}
	}
	if w.Dominant > w.Window {
		v.at(p.key("dominant"), "must not exceed watchdog.window (%d); got %d", w.Window, w.Dominant)
	}
}

// limits checks an agent's per-turn limits (p is its limits key).
func (v *validator) limits(p path, l Limits) {
	for _, f := range []struct {
		key string
		n   int
	}{
		{"model_calls_per_turn", l.ModelCallsPerTurn}, {"tool_calls_per_turn", l.ToolCallsPerTurn}, {"tokens_per_turn", l.TokensPerTurn},
		{"turns_per_hour", l.TurnsPerHour}, {"turn_burst", l.TurnBurst},
	} {
		if f.n < 0 {
			v.at(p.key(f.key), "must not be negative; got %d", f.n)
		}
	}
}

// sharedSubjects checks the subscribe: subjects of different agents
// against each other: the input stream holds them all, and JetStream's
// subjects may not overlap, so where two overlap one must contain the
// other (alerts.> and alerts.prod.>: the stream holds alerts.>).
func (v *validator) sharedSubjects(c *Config) {
	type bound struct {
		agent, sub int
		subject    string
	}
	var all []bound
	for i, a := range c.Agents {
		for j, s := range a.Subscribe {
			if s.Subject == "" {
				continue
			}
			for _, o := range all {
				if o.agent != i && subject.Overlap(s.Subject, o.subject) && !subject.Covers(s.Subject, o.subject) && !subject.Covers(o.subject, s.Subject) {
					v.at(path{"agents"}.index(i).key("subscribe").index(j).key("subject"),
						"%q overlaps %q of agents[%d] (%s), but neither contains the other: the input stream cannot hold both; make one contain the other or make them disjoint",
						s.Subject, o.subject, o.agent, c.Agents[o.agent].Name)
				}
			}
			all = append(all, bound{i, j, s.Subject})
		}
	}
}

func (v *validator) subject(p path, s string) {
	switch {
	case s == "":
		v.at(p, "required: a NATS subject")
	case strings.ContainsAny(s, " \t\r\n"):
		v.at(p, "NATS subject %q contains whitespace", s)
	}
}
