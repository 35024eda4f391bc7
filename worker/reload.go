package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/background"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/metrics"
	"github.com/agent-worker/agent-worker/models"
	"github.com/agent-worker/agent-worker/watchdog"
)

// Reload applies a new config to the running worker without a restart:
// the config file is validated first, compared with the running one
// (reload_diff.go), refused whole when it is invalid or changes a key
// that needs a restart, and otherwise applied: the tokens' values are
// read again (as ReloadTokens does) and the new names, roles and scopes
// take effect; removed agents stop once their running turn has finished
// and let their lease go (their stored state stays); changed agents run
// their next turn with the new spec (driver.Replace: the running turn
// keeps the old one; a new pricing table changes every agent so);
// added agents are placed, leased, bound to their
// input and scheduled as the agents of the start are; MCP servers are
// connected before the agents change and disconnected after
// (reload_mcp.go); the webhooks and wake_on_resolved agents are swapped
// in the API at once (reload_webhooks.go). No message is lost
// or run twice: an agent's messages stay in the input log until its
// cursors pass them, and whoever serves it next reads from the cursors.
//
// Every replica reloads its own file; replicas are not coordinated. An
// agent a replica does not know yet is never taken by it.
//
// Every reload is logged and counted (agent_worker_config_reloads_total
// by outcome), and announced with a config-reloaded event to every agent
// the worker serves; agent_worker_config_info{hash} names the config in
// force.

// Reload outcomes (agent_worker_config_reloads_total{outcome}).
const (
	ReloadApplied   = "applied"   // a changed config is in force
	ReloadUnchanged = "unchanged" // the file is the running config; token values re-read
	ReloadRefused   = "refused"   // invalid, or needs a restart: nothing changed
	ReloadFailed    = "failed"    // valid, but part of it could not be applied (Change says what was)
)

// Errors a reload is refused with; a *ReloadRefusal wraps one of them.
var (
	// ErrConfigInvalid: the file does not load or validate.
	ErrConfigInvalid = errors.New("the config file is invalid")
	// ErrRestartRequired: the file changes keys read only at start.
	ErrRestartRequired = errors.New("the config changes keys that need a restart")
)

// ReloadRefusal is a refused reload: why, and each problem, one per
// entry ("file:line: message").
type ReloadRefusal struct {
	Err      error // ErrConfigInvalid or ErrRestartRequired
	Problems []string
}

func (r *ReloadRefusal) Error() string {
	return fmt.Sprintf("config not reloaded: %v: %d problem(s)", r.Err, len(r.Problems))
}

func (r *ReloadRefusal) Unwrap() error { return r.Err }

// reloadState is what a reload needs beyond the worker's rooms.
type reloadState struct {
	mu       sync.Mutex // one reload at a time
	current  atomic.Pointer[config.Config]
	opts     Options
	watchdog *watchdog.Watchdog
	// infos are the agents' label sets for the metrics, by name, under
	// mu once Start has returned (metricInfo).
	infos map[string]metrics.AgentInfo
}

func (r *reloadState) init(cfg *config.Config, o Options) {
	r.current.Store(cfg)
	r.opts = o
}

// Config returns the config in force: the one the worker started with,
// as the last reload changed it.
func (w *Worker) Config() *config.Config { return w.reload.current.Load() }

// ReloadConfig re-reads the config the worker was started with
// (Options.Source) and applies it with Reload; by names who asked ("signal
// SIGHUP", a token's name), for the log and the event.
func (w *Worker) ReloadConfig(ctx context.Context, by string) (Change, error) {
	if w.reload.opts.Source == nil {
		refusal := &ReloadRefusal{Err: ErrConfigInvalid, Problems: []string{"this worker has no config source to re-read"}}
		w.refuse(by, refusal)
		return Change{}, refusal
	}
	next, err := w.reload.opts.Source()
	if err != nil {
		refusal := &ReloadRefusal{Err: ErrConfigInvalid, Problems: problems(err)}
		w.refuse(by, refusal)
		return Change{}, refusal
	}
	return w.Reload(ctx, next, by)
}

// apiReload is api.Options.Reload: ReloadConfig, answered as the API
// reports it.
func (w *Worker) apiReload(ctx context.Context, by string) (api.ReloadReport, error) {
	ch, err := w.ReloadConfig(ctx, by)
	rep := api.ReloadReport{Outcome: ReloadApplied, Hash: ch.To, Previous: ch.From,
		Added: nonNil(ch.Added), Removed: nonNil(ch.Removed), Changed: nonNil(ch.Changed)}
	if ch.Unchanged() {
		rep.Outcome = ReloadUnchanged
	}
	var refusal *ReloadRefusal
	switch {
	case errors.As(err, &refusal):
		// Nothing changed: the hash is the config still in force.
		rep.Outcome, rep.Problems = ReloadRefused, refusal.Problems
		rep.Hash, rep.Previous = ConfigHash(w.Config()), ""
		rep.Added, rep.Removed, rep.Changed = []string{}, []string{}, []string{}
		if errors.Is(err, ErrRestartRequired) {
			return rep, fmt.Errorf("%w: %w", api.ErrReloadRestart, err)
		}
		return rep, fmt.Errorf("%w: %w", api.ErrReloadInvalid, err)
	case err != nil:
		rep.Outcome = ReloadFailed
	}
	return rep, err
}

// problems lists err's config problems, one "file:line: message" each.
func problems(err error) []string {
	var errs *config.Errors
	if errors.As(err, &errs) {
		out := make([]string, 0, len(*errs))
		for _, e := range *errs {
			out = append(out, e.Error())
		}
		return out
	}
	return []string{err.Error()}
}

// Reload applies next (see the comment at the top of this file). A
// refusal is a *ReloadRefusal and changes nothing; any other error says
// what could not be applied, and the Change what was. ctx bounds the wait
// for the running turns of removed and changed agents.
func (w *Worker) Reload(ctx context.Context, next *config.Config, by string) (Change, error) {
	w.reload.mu.Lock()
	defer w.reload.mu.Unlock()
	cur := w.Config()
	if err := next.Validate(); err != nil {
		refusal := &ReloadRefusal{Err: ErrConfigInvalid, Problems: problems(err)}
		w.refuse(by, refusal)
		return Change{}, refusal
	}
	ch := diffConfig(cur, next)
	if len(ch.RestartOnly) > 0 {
		refusal := &ReloadRefusal{Err: ErrRestartRequired, Problems: ch.RestartOnly}
		w.refuse(by, refusal)
		return ch, refusal
	}
	w.switchedModels(cur, next, &ch) // reload_model.go
	// Everything that can fail without touching the running worker is
	// done first: the new agents' specs, and the tokens' values.
	touched := onlyAgents(next, append(slices.Clone(ch.Added), ch.Changed...))
	specs, err := w.reloadSpecs(ctx, touched)
	var subagents map[string]background.Spec
	if err == nil {
		subagents, err = w.subagentSpecs(ctx, touched, w.reload.opts)
	}
	if err != nil {
		refusal := &ReloadRefusal{Err: ErrConfigInvalid, Problems: []string{err.Error()}}
		w.refuse(by, refusal)
		return ch, refusal
	}
	mcp, refusal := w.planMCP(next) // before prepareSubscribe: it changes nothing
	if refusal != nil {
		w.refuse(by, refusal)
		return ch, refusal
	}
	if err := w.prepareSubscribe(ctx, cur, next); err != nil {
		refusal := &ReloadRefusal{Err: ErrConfigInvalid, Problems: []string{next.Where("agents") + ": " + err.Error()}}
		w.refuse(by, refusal)
		return ch, refusal
	}
	if w.api != nil {
		tokens, err := apiTokens(next.API.Tokens)
		if err == nil {
			err = w.api.SetTokens(tokens)
		}
		if err != nil {
			refusal := &ReloadRefusal{Err: ErrConfigInvalid, Problems: []string{"api.tokens: " + err.Error()}}
			w.refuse(by, refusal)
			return ch, refusal
		}
	}
	if !reflect.DeepEqual(cur.Pricing, next.Pricing) {
		w.guard.SetPrices(guard.NewPrices(next.Pricing)) // the changed agents' ledgers take it up
	}
	w.connectMCP(ctx, mcp) // before the agents: their next turns find the servers
	w.setSubagents(subagents)
	applied, failures := w.applyAgents(ctx, cur, next, ch, specs)
	w.dropSubagents(cur, applied)
	w.settleSubscribe(ctx, cur, applied)
	mcp.Retire()
	if err := w.swapWebhooks(cur, applied); err != nil {
		failures = append(failures, err)
	}
	w.reload.current.Store(applied)
	w.relabel(applied, next, specs)
	outcome := ReloadApplied
	switch {
	case len(failures) > 0:
		outcome = ReloadFailed
	case ch.Unchanged():
		outcome = ReloadUnchanged
	}
	ch.To = ConfigHash(applied)
	w.announce(by, outcome, ch, failures)
	if len(failures) > 0 {
		return ch, fmt.Errorf("config partly reloaded: %s", errors.Join(failures...))
	}
	return ch, nil
}

// onlyAgents is cfg with only its named agents.
func onlyAgents(cfg *config.Config, names []string) *config.Config {
	sub := *cfg
	sub.Agents = nil
	for _, a := range cfg.Agents {
		if slices.Contains(names, a.Name) {
			sub.Agents = append(sub.Agents, a)
		}
	}
	return &sub
}

// reloadSpecs builds the driver specs of next's agents.
func (w *Worker) reloadSpecs(ctx context.Context, next *config.Config) (map[string]driver.Spec, error) {
	specs, err := buildSpecs(ctx, next, w.reload.opts, w.bus, w.mcp)
	if err != nil {
		return nil, err
	}
	out := make(map[string]driver.Spec, len(specs))
	for _, s := range specs {
		out[s.Name] = s
	}
	return out, nil
}

// applyAgents removes, changes and adds the agents ch names, and returns
// the config now in force (next, with the agents that failed to apply as
// they were) and what failed.
func (w *Worker) applyAgents(ctx context.Context, cur, next *config.Config, ch Change, specs map[string]driver.Spec) (*config.Config, []error) {
	applied := *next
	applied.Agents = nil
	var failures []error
	failed := map[string]*config.Agent{}
	lane := driver.Lane(func(agent string, f func()) { w.leases.Serial(agent, f) })
	for _, name := range ch.Removed {
		if err := w.removeAgent(ctx, name, lane); err != nil {
			failures = append(failures, fmt.Errorf("remove agent %s: %w", name, err))
			failed[name], _ = cur.Agent(name)
		}
	}
	for _, name := range ch.Changed {
		a, _ := next.Agent(name)
		if err := w.changeAgent(ctx, *a, specs[name], lane, subscribeChanged(ch, name)); err != nil {
			failures = append(failures, fmt.Errorf("change agent %s: %w", name, err))
			failed[name], _ = cur.Agent(name)
			continue
		}
		w.log.Info("agent changed: its next turn runs with the new config", "agent", name, "keys", ch.Why[name])
	}
	for _, name := range ch.Added {
		a, _ := next.Agent(name)
		if err := w.addAgent(ctx, *a, specs[name]); err != nil {
			failures = append(failures, fmt.Errorf("add agent %s: %w", name, err))
			failed[name] = nil
		}
	}
	for _, a := range next.Agents {
		if f, ok := failed[a.Name]; !ok {
			applied.Agents = append(applied.Agents, a)
		} else if f != nil {
			applied.Agents = append(applied.Agents, *f)
		}
	}
	for _, name := range ch.Removed { // kept: its removal failed
		if f := failed[name]; f != nil {
			applied.Agents = append(applied.Agents, *f)
		}
	}
	w.spread.placeAgents(applied.Agents)
	return &applied, failures
}

// removeAgent stops the agent once its running turn has finished, takes
// it off the input log and lets its lease go; its stored state stays.
func (w *Worker) removeAgent(ctx context.Context, name string, lane driver.Lane) error {
	if err := w.driver.Remove(ctx, name, lane); err != nil {
		return err
	}
	if err := w.binding.RemoveAgent(name); err != nil {
		return err
	}
	w.leases.Forget(ctx, name)
	w.log.Info("agent removed: its turns have stopped here, its lease is released and its stored state kept", "agent", name)
	return nil
}

// changeAgent gives the agent its new spec from its next turn, with its
// new budgets and watchdog settings, and with rebind its new subscribe:
// subjects (natsinbox.Binding.Rebind: between the two turns).
func (w *Worker) changeAgent(ctx context.Context, a config.Agent, spec driver.Spec, lane driver.Lane, rebind bool) error {
	var rebound error
	err := w.driver.Replace(ctx, spec, driver.Handover{
		Lane: lane,
		Before: func() {
			guardAgent(w.guard, a, spec)
			watchAgent(w.reload.watchdog, a)
			if w.leases.Held(a.Name) {
				// The new ledger holds what the store holds, at once: no
				// spend is forgotten in between.
				if err := w.guard.Restore(ctx, a.Name); err != nil {
					w.log.Warn("guardrails not restored after the reload; the agent's restore retries", "agent", a.Name, "error", err)
				}
			}
		},
		Swapped: func(ag *driver.Agent) {
			if !rebind {
				w.binding.Retarget(a.Name, ag)
				return
			}
			// Its next turn reads the new subjects (in core NATS mode
			// Rebind may fail to subscribe: said in the reload's outcome).
			rebound = w.binding.Rebind(ctx, natsinbox.Agent{Name: a.Name, Target: ag, Subscribe: a.Subscribe})
			w.log.Info("agent's subscribe: subjects changed: its next turn reads them", "agent", a.Name, "subscribe", a.Subscribe)
		},
	})
	if err != nil {
		return err
	}
	return rebound
}

// addAgent starts the agent in standby, binds its input, and lets the
// lease manager seek it: it runs here once this replica holds its lease.
func (w *Worker) addAgent(ctx context.Context, a config.Agent, spec driver.Spec) error {
	guardAgent(w.guard, a, spec)
	watchAgent(w.reload.watchdog, a)
	ag, err := w.driver.Add(spec)
	if err != nil {
		return err
	}
	if err := w.binding.AddAgent(ctx, natsinbox.Agent{Name: a.Name, Target: ag, Subscribe: a.Subscribe}); err != nil {
		return err
	}
	w.leases.Learn(a.Name)
	w.log.Info("agent added: it runs on the replica that takes its lease", "agent", a.Name)
	return nil
}

// refuse logs, counts and announces a refused reload.
func (w *Worker) refuse(by string, r *ReloadRefusal) {
	args := []any{"by", by, "reason", r.Err.Error(), "problems", len(r.Problems)}
	w.log.Error("config not reloaded; the running config stays in force", args...)
	for _, p := range r.Problems {
		w.log.Error("config reload problem", "problem", p, "by", by)
	}
	if w.metrics != nil {
		w.metrics.ConfigReload(ReloadRefused)
	}
	w.publishReloaded(map[string]any{"by": by, "what": "config", "ok": false, "outcome": ReloadRefused,
		"error": r.Err.Error(), "problems": r.Problems})
}

// announce logs, counts and announces a reload that was applied (whole,
// or in part: failures).
func (w *Worker) announce(by, outcome string, ch Change, failures []error) {
	level := slog.LevelInfo
	if len(failures) > 0 {
		level = slog.LevelError
	}
	w.log.Log(context.Background(), level, "config reloaded", "by", by, "outcome", outcome, "hash", ch.To, "previous", ch.From,
		"added", ch.Added, "removed", ch.Removed, "changed", ch.Changed, "tokens_changed", ch.Tokens,
		"mcp_servers", ch.MCPServers.data(), "webhooks", ch.Webhooks.data(), "failures", len(failures))
	for _, err := range failures {
		w.log.Error("config reload: not applied", "error", err, "by", by)
	}
	if w.metrics != nil {
		w.metrics.ConfigReload(outcome)
		w.metrics.SetConfigHash(ch.To)
	}
	data := map[string]any{"by": by, "what": "config", "ok": len(failures) == 0, "outcome": outcome, "hash": ch.To, "previous": ch.From,
		"added": nonNil(ch.Added), "removed": nonNil(ch.Removed), "changed": nonNil(ch.Changed), "tokens": len(w.Config().API.Tokens),
		"mcp_servers": ch.MCPServers.data(), "webhooks": ch.Webhooks.data()}
	if len(failures) > 0 {
		data["error"] = errors.Join(failures...).Error()
	}
	w.publishReloaded(data)
}

// publishReloaded publishes a config-reloaded event for every agent the
// worker serves now.
func (w *Worker) publishReloaded(data map[string]any) {
	now := w.reload.opts.Clock.Now()
	for _, a := range w.driver.Agents() {
		w.bus.Publish(events.Event{Time: now, Agent: a.Name(), Type: events.ConfigReloaded, Data: data})
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// guardAgent gives the guard a's limits and model (a reload replaces the
// ledger; the agent's restore loads its spend again).
func guardAgent(g *guard.Guard, a config.Agent, spec driver.Spec) {
	g.AddAgent(a.Name, spec.Model.Name(), guard.Limits{
		TurnUSD: a.Budgets.TurnUSD, SessionUSD: a.Budgets.SessionUSD, DailyUSD: a.Budgets.DailyUSD,
		ModelCallsPerTurn: a.Limits.ModelCallsPerTurn, ToolCallsPerTurn: a.Limits.ToolCallsPerTurn, TokensPerTurn: a.Limits.TokensPerTurn,
	})
	g.AddFallbacks(a.Name, models.FallbackNames(spec.Model)...)
}

// watchAgent gives the watchdog a's settings (a reload starts its
// detectors afresh).
func watchAgent(wd *watchdog.Watchdog, a config.Agent) {
	wd.AddAgent(a.Name, a.Watchdog.Mode, watchdog.Config{Repeat: a.Watchdog.Repeat, CycleRepeats: a.Watchdog.CycleRepeats,
		Dominant: a.Watchdog.Dominant, Window: a.Watchdog.Window, Failures: a.Watchdog.Failures, TurnRepeat: a.Watchdog.TurnRepeat})
}

// metricInfo is agent a's label set for the metrics (its model and
// fallbacks, tools and schedules), as its spec was built; it is kept for
// the reloads to come.
func (w *Worker) metricInfo(cfg *config.Config, a config.Agent, spec driver.Spec) metrics.AgentInfo {
	var fallbacks []metrics.FallbackInfo
	for _, fb := range models.FallbackNames(spec.Model) {
		fallbacks = append(fallbacks, metrics.FallbackInfo{Model: fb, Priced: w.guard.PricedModel(fb)})
	}
	var scheds []string
	for _, s := range spec.Schedules {
		scheds = append(scheds, s.Name)
	}
	info := metrics.AgentInfo{Name: a.Name, Model: spec.Model.Name(), Priced: w.guard.Priced(a.Name),
		Fallbacks: fallbacks, Alternates: w.alternates(cfg), Tools: metricTools(cfg, a), Schedules: scheds}
	if w.reload.infos == nil {
		w.reload.infos = map[string]metrics.AgentInfo{}
	}
	w.reload.infos[a.Name] = info
	return info
}

// relabel gives the metrics the label sets of the agents in force: the
// added and changed ones' anew (specs; those that failed to apply are in
// applied as they were, not as next has them), the others' as they were.
func (w *Worker) relabel(applied, next *config.Config, specs map[string]driver.Spec) {
	infos := make([]metrics.AgentInfo, 0, len(applied.Agents))
	kept := map[string]metrics.AgentInfo{}
	for _, a := range applied.Agents {
		info, ok := w.reload.infos[a.Name]
		if spec, built := specs[a.Name]; built {
			if want, _ := next.Agent(a.Name); want != nil && reflect.DeepEqual(*want, a) {
				info, ok = w.metricInfo(applied, a, spec), true
			}
		}
		if ok {
			// An unchanged agent's too: a server's tool_prefix may have
			// changed, and the models it may be switched to.
			info.Tools, info.Alternates = metricTools(applied, a), w.alternates(applied)
			infos = append(infos, info)
			kept[a.Name] = info
		}
	}
	w.reload.infos = kept
	if w.metrics != nil {
		w.metrics.SetAgents(infos)
	}
}

// currentAgent is a subagent's parent by name: the driver's agent of that
// name when the report arrives (a reload may have replaced it).
type currentAgent struct {
	d    *driver.Driver
	name string
}

func (c currentAgent) Report(subagent string, m inbox.Message) {
	a, err := c.d.Agent(c.name)
	if err != nil {
		return // removed: in JetStream mode reports go through the log, not here
	}
	a.Report(subagent, m)
}

// placeAgents tells the placement the agent set in force after a reload.
func (s *spread) placeAgents(agents []config.Agent) {
	as := s.assigner.Load()
	if as == nil {
		return
	}
	names := make([]string, 0, len(agents))
	for _, a := range agents {
		names = append(names, a.Name)
	}
	as.SetAgents(names)
}
