package anthropic

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/models/internal/wire"
)

// messageParams maps an ADK request onto a Messages API request:
//
//   - Config.SystemInstruction's text → the top-level "system" parameter;
//   - a "model" content → an "assistant" message: text blocks, and a
//     tool_use block (id, name, input) per FunctionCall part;
//   - any other content → a "user" message: a tool_result block per
//     FunctionResponse part (tool_use_id = the response ID, content = the
//     response map as JSON text, is_error when the map is only {"error": …}),
//     then text blocks;
//   - consecutive contents of one role are merged into one message, as the
//     API requires roles to alternate, and in a user message tool_result
//     blocks come first, as the API requires;
//   - Config.Tools' function declarations → tools {name, description,
//     input_schema};
//   - max_tokens is Config.MaxOutputTokens when set, else maxTokens;
//     StopSequences and the function-calling mode are passed on;
//   - with a thinking budget (> 0): thinking {type: "enabled",
//     budget_tokens: budget}, budget added to max_tokens (the API requires
//     max_tokens > budget_tokens), and the thought parts of model contents
//     that carry a signature sent back as they came: "thinking" blocks
//     {thinking, signature}, or "redacted_thinking" {data} for a thought
//     part without text (see llmResponse).
//
// A request goes without thinking, even with a budget, when the API would
// refuse it: when it forces a tool (tool_choice any or tool, which manual
// extended thinking does not allow), or when it continues a tool-use loop
// whose assistant message does not start with a thinking block (one
// thinking configuration per assistant turn: a loop started by a fallback
// model, or before reasoning was configured, finishes without thinking).
//
// Without thinking, thought parts are left out. Empty texts are always
// left out (the API rejects empty text blocks). Parts it cannot carry here
// (inline data, files, code) and non-function tools are errors rather than
// silently dropped.
func messageParams(name string, maxTokens, budget int64, req *model.LLMRequest) (sdk.MessageNewParams, error) {
	p := sdk.MessageNewParams{Model: sdk.Model(name), MaxTokens: maxTokens}
	cfg := req.Config
	if cfg == nil {
		cfg = &genai.GenerateContentConfig{}
	}
	if cfg.MaxOutputTokens > 0 {
		p.MaxTokens = int64(cfg.MaxOutputTokens)
	}
	if sys := wire.JoinText(cfg.SystemInstruction, "\n\n"); sys != "" {
		p.System = []sdk.TextBlockParam{{Text: sys}}
	}

	thinking := budget > 0 && !forcesTool(cfg) && !loopWithoutThinking(req.Contents)
	if thinking {
		p.Thinking = sdk.ThinkingConfigParamOfEnabled(budget)
		p.MaxTokens += budget
	}

	msgs, err := messages(req.Contents, thinking)
	if err != nil {
		return p, err
	}
	p.Messages = msgs

	tools, err := toolParams(cfg.Tools)
	if err != nil {
		return p, err
	}
	p.Tools = tools
	if len(p.Tools) > 0 {
		p.ToolChoice = toolChoice(cfg.ToolConfig)
	}
	if len(cfg.StopSequences) > 0 {
		p.StopSequences = cfg.StopSequences
	}
	return p, nil
}

// messages turns the request's contents into the Messages API's
// alternating turns. Consecutive contents of the same role are merged into
// one message, because the API rejects two user or two assistant messages
// in a row; in a user message tool results go first, as the API requires.
func messages(contents []*genai.Content, thinking bool) ([]sdk.MessageParam, error) {
	type turn struct {
		assistant bool
		blocks    []sdk.ContentBlockParamUnion
	}
	var turns []turn
	for i, c := range contents {
		if c == nil {
			continue
		}
		assistant := c.Role == genai.RoleModel
		blocks, err := contentBlocks(c, assistant, thinking)
		if err != nil {
			return nil, fmt.Errorf("contents[%d]: %w", i, err)
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(turns); n > 0 && turns[n-1].assistant == assistant {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			continue
		}
		turns = append(turns, turn{assistant: assistant, blocks: blocks})
	}
	if len(turns) == 0 {
		return nil, fmt.Errorf("request has no messages")
	}
	var msgs []sdk.MessageParam
	for _, t := range turns {
		if t.assistant {
			msgs = append(msgs, sdk.NewAssistantMessage(t.blocks...))
		} else {
			msgs = append(msgs, sdk.NewUserMessage(toolResultsFirst(t.blocks)...))
		}
	}
	return msgs, nil
}

// toolParams declares the request's function tools to the API, each with
// its JSON schema and, when it has one, its description.
func toolParams(tools []*genai.Tool) ([]sdk.ToolUnionParam, error) {
	fns, err := wire.Functions(tools)
	if err != nil {
		return nil, err
	}
	var out []sdk.ToolUnionParam
	for _, f := range fns {
		tp := sdk.ToolParam{Name: f.Name, InputSchema: inputSchema(f.Parameters)}
		if f.Description != "" {
			tp.Description = sdk.String(f.Description)
		}
		out = append(out, sdk.ToolUnionParam{OfTool: &tp})
	}
	return out, nil
}

// toolChoice maps genai's function-calling mode onto the API's tool
// choice: NONE forbids tools, ANY and VALIDATED force a tool (the one
// named, when exactly one is allowed). Other modes, or no config, leave
// the choice unset so the API's default (auto) applies.
func toolChoice(tc *genai.ToolConfig) sdk.ToolChoiceUnionParam {
	if tc == nil || tc.FunctionCallingConfig == nil {
		return sdk.ToolChoiceUnionParam{}
	}
	fc := tc.FunctionCallingConfig
	switch fc.Mode {
	case genai.FunctionCallingConfigModeNone:
		return sdk.ToolChoiceUnionParam{OfNone: &sdk.ToolChoiceNoneParam{}}
	case genai.FunctionCallingConfigModeAny, genai.FunctionCallingConfigModeValidated:
		if len(fc.AllowedFunctionNames) == 1 {
			return sdk.ToolChoiceUnionParam{OfTool: &sdk.ToolChoiceToolParam{Name: fc.AllowedFunctionNames[0]}}
		}
		return sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{}}
	}
	return sdk.ToolChoiceUnionParam{}
}

// forcesTool reports whether cfg makes the model call a tool (tool_choice
// any or tool), which extended thinking does not allow.
func forcesTool(cfg *genai.GenerateContentConfig) bool {
	if cfg.ToolConfig == nil || cfg.ToolConfig.FunctionCallingConfig == nil || !slices.ContainsFunc(cfg.Tools, func(t *genai.Tool) bool {
		return t != nil && len(t.FunctionDeclarations) > 0
	}) {
		return false
	}
	switch cfg.ToolConfig.FunctionCallingConfig.Mode {
	case genai.FunctionCallingConfigModeAny, genai.FunctionCallingConfigModeValidated:
		return true
	}
	return false
}

// loopWithoutThinking reports whether contents end in a tool-use loop (the
// last message carries tool results) whose assistant message does not
// start with a signed thought part: sending thinking now would be
// refused ("a final assistant message must start with a thinking block").
func loopWithoutThinking(contents []*genai.Content) bool {
	last := len(contents) - 1
	for last >= 0 && contents[last] == nil {
		last--
	}
	if last < 0 || contents[last].Role == genai.RoleModel || !slices.ContainsFunc(contents[last].Parts, func(p *genai.Part) bool {
		return p != nil && p.FunctionResponse != nil
	}) {
		return false
	}
	end := last
	for end >= 0 && (contents[end] == nil || contents[end].Role != genai.RoleModel) {
		end--
	}
	if end < 0 {
		return false
	}
	start := end
	for start > 0 && (contents[start-1] == nil || contents[start-1].Role == genai.RoleModel) {
		start--
	}
	for _, c := range contents[start : end+1] {
		if c == nil {
			continue
		}
		for _, p := range c.Parts {
			switch {
			case p == nil:
			case p.Thought:
				if len(p.ThoughtSignature) > 0 {
					return false
				}
			case p.FunctionCall != nil, strings.TrimSpace(p.Text) != "":
				return true
			}
		}
	}
	return true
}

func contentBlocks(c *genai.Content, assistant, thinking bool) ([]sdk.ContentBlockParamUnion, error) {
	var blocks []sdk.ContentBlockParamUnion
	for j, part := range c.Parts {
		switch {
		case part == nil:
		case part.Thought:
			// Sent back unchanged (the signature vouches for the text),
			// and only to a request that thinks: Anthropic's own blocks.
			switch sig := string(part.ThoughtSignature); {
			case !thinking || !assistant || sig == "":
			case part.Text != "":
				blocks = append(blocks, sdk.NewThinkingBlock(sig, part.Text))
			default:
				blocks = append(blocks, sdk.NewRedactedThinkingBlock(sig))
			}
		case part.FunctionCall != nil:
			if !assistant {
				return nil, fmt.Errorf("parts[%d]: function call in a %q content", j, c.Role)
			}
			fc := part.FunctionCall
			args := fc.Args
			if args == nil {
				args = map[string]any{}
			}
			blocks = append(blocks, sdk.NewToolUseBlock(fc.ID, args, fc.Name))
		case part.FunctionResponse != nil:
			if assistant {
				return nil, fmt.Errorf("parts[%d]: function response in a model content", j)
			}
			fr := part.FunctionResponse
			resp := fr.Response
			if resp == nil {
				resp = map[string]any{}
			}
			raw, err := json.Marshal(resp)
			if err != nil {
				return nil, fmt.Errorf("parts[%d]: encode result of %q: %w", j, fr.Name, err)
			}
			_, failed := resp["error"]
			blocks = append(blocks, sdk.NewToolResultBlock(fr.ID, string(raw), failed && len(resp) == 1))
		case part.Text != "":
			if strings.TrimSpace(part.Text) == "" {
				continue
			}
			blocks = append(blocks, sdk.NewTextBlock(part.Text))
		case part.InlineData != nil, part.FileData != nil, part.ExecutableCode != nil, part.CodeExecutionResult != nil:
			return nil, fmt.Errorf("parts[%d]: %s parts are not supported by the anthropic provider", j, wire.PartKind(part))
		}
	}
	return blocks, nil
}

// toolResultsFirst moves tool_result blocks ahead of the others, keeping
// each group's order.
func toolResultsFirst(blocks []sdk.ContentBlockParamUnion) []sdk.ContentBlockParamUnion {
	out := make([]sdk.ContentBlockParamUnion, 0, len(blocks))
	for _, b := range blocks {
		if b.OfToolResult != nil {
			out = append(out, b)
		}
	}
	for _, b := range blocks {
		if b.OfToolResult == nil {
			out = append(out, b)
		}
	}
	return out
}

// inputSchema splits a JSON schema object into the SDK's input_schema
// fields; "type" is always "object" there.
func inputSchema(schema map[string]any) sdk.ToolInputSchemaParam {
	var in sdk.ToolInputSchemaParam
	extra := map[string]any{}
	for k, v := range schema {
		switch k {
		case "type":
		case "properties":
			in.Properties = v
		case "required":
			if rs, ok := v.([]any); ok {
				for _, r := range rs {
					if s, ok := r.(string); ok {
						in.Required = append(in.Required, s)
					}
				}
			} else if rs, ok := v.([]string); ok {
				in.Required = rs
			}
		default:
			extra[k] = v
		}
	}
	if in.Properties == nil {
		in.Properties = map[string]any{}
	}
	if len(extra) > 0 {
		in.ExtraFields = extra
	}
	return in
}
