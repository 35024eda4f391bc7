package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/adk/agent"
	"google.golang.org/adk/agent/llmagent"
	"google.golang.org/adk/model"
	"google.golang.org/adk/plugin"
	"google.golang.org/adk/runner"
	"google.golang.org/adk/session"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/memory"
)

// errOneCall stops a second model call of an ask (there is none: the
// answer's function calls are taken out, so the flow ends after one).
var errOneCall = errors.New("an ask makes one model call")

// askCall runs the ask's one model call, through ADK as a turn's calls
// run — the same agent instruction and name, the memory plugin, the
// contents ADK builds from the history window — on a scratch session
// holding a snapshot of the window and the prompt: nothing reaches the
// agent's history. refused says a guard refused the call before it was
// made.
func (a *Agent) askCall(ctx context.Context, prompt string) (ans Answer, refused bool, err error) {
	snap, err := a.hist.Window(ctx, AppName, a.spec.Name, a.spec.Name)
	if err != nil {
		return ans, false, fmt.Errorf("read the history window: %w", err)
	}
	ans.HistoryTurns = snap.Turns
	scratch := session.InMemoryService()
	created, err := scratch.Create(ctx, &session.CreateRequest{AppName: AppName, UserID: a.spec.Name, SessionID: a.spec.Name, State: snap.State})
	if err != nil {
		return ans, false, fmt.Errorf("start the ask's scratch session: %w", err)
	}
	used := map[string]bool{}
	for _, ev := range snap.Events {
		cp := *ev // the window's events are shared: the scratch session gets copies
		cp.Actions = session.EventActions{}
		if err := scratch.AppendEvent(ctx, created.Session, &cp); err != nil {
			return ans, false, fmt.Errorf("copy the history window: %w", err)
		}
		if cp.Content != nil {
			for _, p := range cp.Content.Parts {
				if p != nil && p.FunctionCall != nil {
					used[p.FunctionCall.Name] = true
				}
			}
		}
	}
	c := &askCallState{a: a, used: used}
	llm, err := llmagent.New(llmagent.Config{
		Name:        a.spec.Name,
		Description: description(a.spec.Name), // as the agent's turns
		Model:       a.spec.Model,
		Instruction: a.spec.Instruction,
	})
	if err != nil {
		return ans, false, fmt.Errorf("build the ask's ADK agent: %w", err)
	}
	var plugins []*plugin.Plugin
	if p := a.memoryPlugin(); p != nil {
		plugins = append(plugins, p) // as in turns: the memory first
	}
	plugins = append(plugins, c.plugin())
	r, err := runner.New(runner.Config{AppName: AppName, Agent: llm, SessionService: scratch, PluginConfig: runner.PluginConfig{Plugins: plugins}})
	if err != nil {
		return ans, false, fmt.Errorf("build the ask's ADK runner: %w", err)
	}
	for _, err = range r.Run(ctx, a.spec.Name, a.spec.Name, genai.NewContentFromText(prompt, genai.RoleUser), agent.RunConfig{}) {
		if err != nil {
			break
		}
	}
	ans.Text, ans.NotRun, ans.CostUSD = c.text.String(), c.notRun, c.cost
	if c.resp != nil {
		ans.Model = a.spec.Model.Name()
		if s, _ := c.resp.CustomMetadata[hook.ServedByKey].(string); s != "" {
			ans.Model = s
		}
		if u := c.resp.UsageMetadata; u != nil {
			ans.TokensIn, ans.TokensOut = int(u.PromptTokenCount), int(u.CandidatesTokenCount)
		}
	}
	switch {
	case c.refused != nil:
		return ans, true, c.refused
	case err == nil && c.resp == nil:
		err = errors.New("the model gave no response")
	case err == nil:
		err = ctx.Err()
	}
	return ans, false, err
}

// askCallState is one ask's call as its plugin sees it. The callbacks
// run on the runner's goroutine, one after the other.
type askCallState struct {
	a       *Agent
	used    map[string]bool // tools the history's function calls name
	calls   int
	refused error
	resp    *model.LLMResponse
	cost    float64
	text    strings.Builder
	notRun  []string
}

// plugin admits the call (before it), charges and reads its response
// (after it), and takes the answer's function calls out so that no tool
// runs and the flow ends.
func (c *askCallState) plugin() *plugin.Plugin {
	p, _ := plugin.New(plugin.Config{
		Name: "ask",
		BeforeModelCallback: func(_ agent.CallbackContext, req *model.LLMRequest) (*model.LLMResponse, error) {
			if c.calls++; c.calls > 1 {
				return nil, errOneCall
			}
			c.declareUsed(req)
			est := memory.Tokens(requestText(req))
			for _, g := range c.a.guards {
				if sc, ok := g.(hook.SideCallGuard); ok {
					if err := sc.AdmitSideCall(c.a.spec.Name, est); err != nil {
						c.refused = err
						return nil, err
					}
				}
			}
			return nil, nil
		},
		AfterModelCallback: func(_ agent.CallbackContext, resp *model.LLMResponse, _ error) (*model.LLMResponse, error) {
			if resp == nil || resp.Partial {
				return nil, nil
			}
			c.resp = resp
			for _, g := range c.a.guards {
				if sc, ok := g.(hook.SideCallGuard); ok {
					c.cost += sc.ChargeSideCall(c.a.spec.Name, resp)
				}
			}
			return c.answerOf(resp), nil
		},
	})
	return p
}

// answerOf keeps the text of resp as the answer and returns resp without
// its function calls (named in notRun), or nil when it has none.
func (c *askCallState) answerOf(resp *model.LLMResponse) *model.LLMResponse {
	if resp.Content == nil {
		return nil
	}
	var kept []*genai.Part
	for _, p := range resp.Content.Parts {
		switch {
		case p == nil:
		case p.FunctionCall != nil:
			c.notRun = append(c.notRun, p.FunctionCall.Name)
		default:
			if p.Text != "" && !p.Thought {
				c.text.WriteString(p.Text)
			}
			kept = append(kept, p)
		}
	}
	if len(c.notRun) == 0 {
		return nil
	}
	out := *resp
	out.Content = &genai.Content{Role: resp.Content.Role, Parts: kept}
	return &out
}

// declareUsed declares the tools the history's function calls name, with
// function calling off: a provider may refuse a history with tool calls
// and no tools (Anthropic's Messages API does), and the ask lets the
// model call none. A built-in tool keeps its own declaration; any other
// (an MCP tool) gets its name alone.
func (c *askCallState) declareUsed(req *model.LLMRequest) {
	if len(c.used) == 0 {
		return
	}
	if req.Config == nil {
		req.Config = &genai.GenerateContentConfig{}
	}
	var decls []*genai.FunctionDeclaration
	for _, name := range slices.Sorted(maps.Keys(c.used)) {
		decl := &genai.FunctionDeclaration{Name: name, Description: "a tool of this agent, not callable in this answer",
			Parameters: &genai.Schema{Type: genai.TypeObject}}
		for _, t := range c.a.tools {
			if d, ok := t.(interface {
				Declaration() *genai.FunctionDeclaration
			}); ok && t.Name() == name && d.Declaration() != nil {
				decl = d.Declaration()
			}
		}
		decls = append(decls, decl)
	}
	req.Config.Tools = append(req.Config.Tools, &genai.Tool{FunctionDeclarations: decls})
	req.Config.ToolConfig = &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeNone}}
}

// requestText is req's system instruction and contents as text, to
// estimate its tokens (memory.Tokens) before the call.
func requestText(req *model.LLMRequest) string {
	var b strings.Builder
	if req.Config != nil && req.Config.SystemInstruction != nil {
		for _, p := range req.Config.SystemInstruction.Parts {
			if p != nil {
				b.WriteString(p.Text)
			}
		}
	}
	contents, _ := json.Marshal(req.Contents)
	b.Write(contents)
	return b.String()
}

// askPrompt frames an operator's question as the ask's user message:
// trusted operator text, outside any external-data fence, after a line
// saying who asks and what the agent is doing.
func askPrompt(by, question, state string) string {
	who := "an operator"
	if by != "" {
		who = fmt.Sprintf("the operator %q", inbox.Inline(by))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[side question from %s, asked outside your turns]\n", who)
	fmt.Fprintf(&b, "[note: %s]\n\n", inbox.Inline(state))
	b.WriteString("The operator asks you the question below about your work. Answer it from what you know now: your instructions, your memory and the conversation above. Answer in plain text, directly and briefly. You cannot call tools for this answer; it is not added to your history and starts no turn.\n\n")
	b.WriteString(question)
	b.WriteString("\n")
	return b.String()
}
