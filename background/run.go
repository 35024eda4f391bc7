package background

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/adk/agent"
	"google.golang.org/adk/agent/llmagent"
	"google.golang.org/adk/model"
	"google.golang.org/adk/plugin"
	"google.golang.org/adk/runner"
	"google.golang.org/adk/session"
	"google.golang.org/adk/tool"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/money"
)

// run executes the subagent's task as one ADK run and returns its final
// text.
func (m *Manager) run(ctx context.Context, f *family, s *sub) (string, error) {
	llm, err := f.spec.Model()
	if err != nil {
		return "", err
	}
	var ts []tool.Tool
	if f.spec.Tools != nil {
		if ts, err = f.spec.Tools(); err != nil {
			return "", err
		}
	}
	a, err := llmagent.New(llmagent.Config{
		Name:        "subagent",
		Model:       llm,
		Instruction: strings.TrimSpace(f.spec.Instruction + "\nYou are a background subagent. Complete the task you are given and answer with the result; nobody can answer your questions."),
		Tools:       ts,
	})
	if err != nil {
		return "", err
	}
	r, err := runner.New(runner.Config{AppName: "agent-worker-subagent", Agent: a, SessionService: session.InMemoryService(),
		AutoCreateSession: true, PluginConfig: runner.PluginConfig{Plugins: []*plugin.Plugin{m.meter(f, s)}}})
	if err != nil {
		return "", err
	}
	ctx, span := m.startSpan(ctx, f, s)
	defer span.End()
	var text string
	for ev, err := range r.Run(ctx, f.name, s.id, genai.NewContentFromText(s.task, genai.RoleUser), agent.RunConfig{}) {
		if err != nil {
			return text, err
		}
		if ev != nil && ev.Content != nil && ev.Content.Role == genai.RoleModel {
			for _, p := range ev.Content.Parts {
				if p.Text != "" && !p.Thought {
					text = p.Text
				}
			}
		}
	}
	return text, ctx.Err()
}

// meter admits every model call (the parent not halted, no stop asked
// for), charges every completed response to the parent and stops the
// subagent at its budget.
func (m *Manager) meter(f *family, s *sub) *plugin.Plugin {
	p, _ := plugin.New(plugin.Config{
		Name: "subagent-meter",
		BeforeModelCallback: func(cctx agent.CallbackContext, _ *model.LLMRequest) (*model.LLMResponse, error) {
			if s.job != nil {
				return nil, s.job.Admit(cctx)
			}
			if m.o.Charger != nil {
				if err := m.o.Charger.Admit(cctx, f.name); err != nil {
					s.cancel(haltCause(err.Error()))
					return nil, err
				}
			}
			return nil, nil
		},
		AfterModelCallback: func(cctx agent.CallbackContext, resp *model.LLMResponse, _ error) (*model.LLMResponse, error) {
			if resp == nil || resp.Partial || !f.spec.Priced {
				return nil, nil
			}
			cost := f.spec.Price.Cost(guard.UsageOf(resp.UsageMetadata, resp.CustomMetadata))
			m.mu.Lock()
			s.calls++
			call := s.calls
			m.mu.Unlock()
			if s.job != nil {
				if err := s.job.Charge(call, cost); err != nil {
					s.cancel(err)
					return nil, err
				}
			} else if m.o.Charger != nil {
				m.o.Charger.Charge(f.name, cost)
			}
			m.mu.Lock()
			s.spent += cost
			total := s.prior + s.spent
			over := f.spec.BudgetUSD > 0 && total >= f.spec.BudgetUSD
			m.mu.Unlock()
			if over {
				s.cancel(errBudget)
				return nil, fmt.Errorf("%w: %s of %s", errBudget, money.USD(total), money.USD(f.spec.BudgetUSD))
			}
			return nil, nil
		},
	})
	return p
}
