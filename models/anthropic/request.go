package anthropic

import (
	"encoding/json"
	"fmt"
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
//     StopSequences and the function-calling mode are passed on.
//
// Thought parts and empty texts are left out (the API rejects empty text
// blocks). Parts it cannot carry here (inline data, files, code) and
// non-function tools are errors rather than silently dropped.
func messageParams(name string, maxTokens int64, req *model.LLMRequest) (sdk.MessageNewParams, error) {
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

	type turn struct {
		assistant bool
		blocks    []sdk.ContentBlockParamUnion
	}
	var turns []turn
	for i, c := range req.Contents {
		if c == nil {
			continue
		}
		assistant := c.Role == genai.RoleModel
		blocks, err := contentBlocks(c, assistant)
		if err != nil {
			return p, fmt.Errorf("contents[%d]: %w", i, err)
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
		return p, fmt.Errorf("request has no messages")
	}
	for _, t := range turns {
		if t.assistant {
			p.Messages = append(p.Messages, sdk.NewAssistantMessage(t.blocks...))
		} else {
			p.Messages = append(p.Messages, sdk.NewUserMessage(toolResultsFirst(t.blocks)...))
		}
	}

	fns, err := wire.Functions(cfg.Tools)
	if err != nil {
		return p, err
	}
	for _, f := range fns {
		tp := sdk.ToolParam{Name: f.Name, InputSchema: inputSchema(f.Parameters)}
		if f.Description != "" {
			tp.Description = sdk.String(f.Description)
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: &tp})
	}
	if tc := cfg.ToolConfig; tc != nil && tc.FunctionCallingConfig != nil && len(p.Tools) > 0 {
		fc := tc.FunctionCallingConfig
		switch fc.Mode {
		case genai.FunctionCallingConfigModeNone:
			p.ToolChoice = sdk.ToolChoiceUnionParam{OfNone: &sdk.ToolChoiceNoneParam{}}
		case genai.FunctionCallingConfigModeAny, genai.FunctionCallingConfigModeValidated:
			if len(fc.AllowedFunctionNames) == 1 {
				p.ToolChoice = sdk.ToolChoiceUnionParam{OfTool: &sdk.ToolChoiceToolParam{Name: fc.AllowedFunctionNames[0]}}
			} else {
				p.ToolChoice = sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{}}
			}
		}
	}
	if len(cfg.StopSequences) > 0 {
		p.StopSequences = cfg.StopSequences
	}
	return p, nil
}

func contentBlocks(c *genai.Content, assistant bool) ([]sdk.ContentBlockParamUnion, error) {
	var blocks []sdk.ContentBlockParamUnion
	for j, part := range c.Parts {
		switch {
		case part == nil, part.Thought:
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
