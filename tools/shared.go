package tools

import (
	"errors"
	"fmt"
	"reflect"
	"sync"

	"google.golang.org/adk/model"
	"google.golang.org/adk/tool"
	"google.golang.org/adk/tool/functiontool"
	"google.golang.org/genai"
)

// A built-in tool is built once per (name, description) and shared by
// every agent whose tool reads the same: ADK's functiontool.New resolves
// the argument and result schemas each time it is called, which cost more
// than a third of a 10,000-agent start. Each agent gets a bound tool that
// carries its own handler and hands it to the shared tool in the
// tool.Context of each call (handlerCtx), so nothing one agent's tool acts
// on is reachable from another's.

// functionTool is what ADK's flow needs of a function tool (its own
// interface is internal): a declaration for the model and a Run.
type functionTool interface {
	tool.Tool
	Declaration() *genai.FunctionDeclaration
	Run(ctx tool.Context, args any) (map[string]any, error)
}

type sharedKey struct {
	name, description string
	args, results     reflect.Type
}

// shared holds the tools built so far, by sharedKey.
var shared sync.Map // sharedKey → functionTool

// handlerKey is the tool.Context value under which a bound tool passes
// its handler to the shared tool.
type handlerKey struct{}

// handlerCtx is the tool.Context of one call, carrying the calling
// agent's handler.
type handlerCtx struct {
	tool.Context
	handler any
}

func (c handlerCtx) Value(key any) any {
	if key == (handlerKey{}) {
		return c.handler
	}
	return c.Context.Value(key)
}

// errUnbound is what a shared tool answers when it is run other than
// through an agent's bound tool: never, unless this file is broken.
var errUnbound = errors.New("tool run without its agent's handler")

// newTool returns cfg's tool running handler: the shared tool for cfg's
// name and description (built on first use, with the schemas of
// schemaOf), bound to handler.
func newTool[TArgs, TResults any](cfg functiontool.Config, handler functiontool.Func[TArgs, TResults]) (tool.Tool, error) {
	key := sharedKey{cfg.Name, cfg.Description, reflect.TypeFor[TArgs](), reflect.TypeFor[TResults]()}
	s, ok := shared.Load(key)
	if !ok {
		cfg.InputSchema, cfg.OutputSchema = schemaOf[TArgs](), schemaOf[TResults]()
		t, err := functiontool.New(cfg, func(ctx tool.Context, a TArgs) (TResults, error) {
			h, ok := ctx.Value(handlerKey{}).(functiontool.Func[TArgs, TResults])
			if !ok {
				var zero TResults
				return zero, errUnbound
			}
			return h(ctx, a)
		})
		if err != nil {
			return nil, err
		}
		ft, ok := t.(functionTool)
		if !ok {
			return nil, fmt.Errorf("ADK's function tool %T has no Declaration and Run", t)
		}
		s, _ = shared.LoadOrStore(key, ft)
	}
	return &bound{shared: s.(functionTool), handler: handler}, nil
}

// bound is one agent's tool: the shared tool with the agent's handler.
type bound struct {
	shared  functionTool
	handler any
}

func (b *bound) Name() string        { return b.shared.Name() }
func (b *bound) Description() string { return b.shared.Description() }
func (b *bound) IsLongRunning() bool { return b.shared.IsLongRunning() }

// Declaration is the shared tool's: the same for every agent.
func (b *bound) Declaration() *genai.FunctionDeclaration { return b.shared.Declaration() }

// Run runs the shared tool with this agent's handler.
func (b *bound) Run(ctx tool.Context, args any) (map[string]any, error) {
	return b.shared.Run(handlerCtx{Context: ctx, handler: b.handler}, args)
}

// ProcessRequest offers the tool to the model, as ADK's function tools do:
// its declaration among the request's function declarations, and this
// bound tool (not the shared one) as what runs a call of it.
func (b *bound) ProcessRequest(_ tool.Context, req *model.LLMRequest) error {
	if req.Tools == nil {
		req.Tools = map[string]any{}
	}
	name := b.Name()
	if _, dup := req.Tools[name]; dup {
		return fmt.Errorf("duplicate tool: %q", name)
	}
	req.Tools[name] = b
	if req.Config == nil {
		req.Config = &genai.GenerateContentConfig{}
	}
	decl := b.Declaration()
	for _, t := range req.Config.Tools {
		if t != nil && t.FunctionDeclarations != nil {
			t.FunctionDeclarations = append(t.FunctionDeclarations, decl)
			return nil
		}
	}
	req.Config.Tools = append(req.Config.Tools, &genai.Tool{FunctionDeclarations: []*genai.FunctionDeclaration{decl}})
	return nil
}
