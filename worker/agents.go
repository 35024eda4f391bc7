package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/mcptools"
	"github.com/agent-worker/agent-worker/models"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/scheduler"
	"github.com/agent-worker/agent-worker/tools"
	"github.com/agent-worker/agent-worker/watchdog"
	"google.golang.org/adk/model"
	"google.golang.org/adk/tool"
)

// startMCP starts the MCP servers' clients; without servers too: a
// reload may add some.
func (w *Worker) startMCP(s *starting) error {
	var err error
	w.mcp, err = mcptools.Start(s.cfg.MCPServers, mcptools.Options{Log: s.o.Log})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

func (w *Worker) closeMCP(context.Context) {
	if w.mcp != nil { // after the driver: no turn calls a tool any more
		w.mcp.Close()
	}
}

// resolveSpecs resolves the agents into what the driver runs.
func (w *Worker) resolveSpecs(s *starting) error {
	var err error
	s.specs, err = buildSpecs(s.ctx, s.cfg, s.o, w.bus, w.mcp)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// buildSpecs resolves each configured agent into what the driver runs,
// with its own model instance (and instances of the model's fallbacks).
func buildSpecs(ctx context.Context, cfg *config.Config, o Options, bus *events.Bus, mcp *mcptools.Servers) ([]driver.Spec, error) {
	var specs []driver.Spec
	for _, a := range cfg.Agents {
		env := models.Env{Agent: a.Name, Events: bus, Log: o.Log, Clock: o.Clock}
		// A switch builds models long after ctx (a start's, a reload's)
		// has ended.
		bctx := context.WithoutCancel(ctx)
		one := func(key string, def config.Model) (model.LLM, error) {
			if o.Models != nil {
				return o.Models(a.Name, def)
			}
			return models.New(bctx, key, def, env)
		}
		build := func(key string) (model.LLM, error) { return models.WithFallbacks(key, cfg.Models, one, env) }
		m, err := build(a.Model)
		if err != nil {
			return nil, fmt.Errorf("agent %q: %w", a.Name, err)
		}
		// An operator may switch it to any configured model (driver.ModelSwitch).
		m = models.NewSwitch(a.Model, m, cfg.Models, one, env)
		mem, err := memorySpec(cfg, a, m, build, o.Log)
		if err != nil {
			return nil, fmt.Errorf("agent %q: memory: %w", a.Name, err)
		}
		spec := driver.Spec{
			Name:                a.Name,
			Instruction:         a.Instruction,
			Model:               m,
			Tools:               a.Tools,
			Publish:             a.Publish,
			HTTPGet:             a.HTTPGet,
			HTTPGetAllowPrivate: a.HTTPGetAllowPrivate,
			Sleep:               tools.Sleep{Min: a.Sleep.Min.D(), Max: a.Sleep.Max.D()},
			Heartbeat:           a.Sleep.Default.D(),
			InboxCap:            a.Inbox.Cap,
			TurnTimeout:         a.Turn.Timeout.D(),
			Coalesce:            a.Turn.Coalesce.D(),
			MaxTurnsPerWake:     a.Turn.MaxPerWake,
			HistoryTurns:        a.Turn.HistoryTurns,
			Retry:               driver.Backoff{Base: a.Turn.Retry.Base.D(), Max: a.Turn.Retry.Max.D()},
			MaxInputBytes:       a.Turn.MaxInputBytes,
			ResumeWithin:        a.Turn.ResumeWithin.D(),
			Approval:            a.Approval,
			ApprovalTTL:         a.ApprovalTTL.D(),
			// The journal's messages are read from the log at once.
			ResumeWait:   10 * time.Second,
			TurnsPerHour: a.Limits.TurnsPerHour,
			TurnBurst:    a.Limits.TurnBurst,
			Schedules:    schedules(a.Schedules),
			Memory:       mem,
		}
		if len(a.MCP) > 0 && mcp != nil {
			spec.Toolsets = []tool.Toolset{mcp.Toolset(a.Name, a.MCP, a.Tools)}
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

func schedules(in []config.Schedule) []scheduler.Schedule {
	out := make([]scheduler.Schedule, 0, len(in))
	for _, s := range in {
		out = append(out, scheduler.Schedule{
			Name: s.Name, Cron: s.Cron, Timezone: s.Timezone, Prompt: s.Prompt,
			Overlap: s.Overlap, Jitter: s.Jitter.D(), Enabled: s.Enabled == nil || *s.Enabled,
		})
	}
	return out
}

// initScheduler makes the agents' timers' scheduler.
func (w *Worker) initScheduler(s *starting) error {
	s.sched = scheduler.New(scheduler.Options{Store: w.store, Clock: s.o.Clock, Log: s.o.Log, Events: w.bus, Owner: &w.owner})
	return nil
}

// initGuards makes the cost guardrails and the watchdog, and sets each
// agent's budgets and limits.
func (w *Worker) initGuards(s *starting) error {
	cfg, o := s.cfg, s.o
	loc, err := time.LoadLocation(cfg.Guardrails.Timezone)
	if err != nil {
		return fmt.Errorf("%w: guardrails.timezone: %w", ErrConfig, err)
	}
	w.guard = guard.New(guard.Options{Store: w.store, Clock: o.Clock, Log: o.Log, Events: w.bus,
		Prices: guard.NewPrices(cfg.Pricing), Location: loc, WorkerDailyUSD: cfg.Guardrails.WorkerDailyUSD, Owner: &w.owner})
	for i, a := range cfg.Agents {
		guardAgent(w.guard, a, s.specs[i])
	}
	wd := watchdog.New(watchdog.Options{Log: o.Log, Events: w.bus, Clock: o.Clock, Tripper: w.guard})
	w.reload.watchdog = wd
	for _, a := range cfg.Agents {
		watchAgent(wd, a)
	}
	return nil
}

// initDriver makes the agents' driver; runLoops starts their loops.
func (w *Worker) initDriver(s *starting) error {
	cfg, o := s.cfg, s.o
	var err error
	w.driver, err = driver.New(driver.Deps{Clock: o.Clock, Store: w.store, Events: w.bus, Log: o.Log,
		Publisher: natsbus.Publisher{NC: w.conn.NC}, SubjectPrefix: cfg.NATS.SubjectPrefix, Scheduler: s.sched, Guards: []hook.Guard{w.guard, w.reload.watchdog, w.subagents.Guard()},
		Subagents: w.subagents, Leased: true, Health: w.health, Tracer: o.tracer()}, s.specs)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}
