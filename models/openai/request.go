package openai

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/models/internal/wire"
)

// chatParams maps an ADK request onto a Chat Completions request:
//
//   - Config.SystemInstruction's text → one "system" message, first;
//   - a "model" content → one "assistant" message: its text parts joined as
//     content, its FunctionCall parts as tool_calls (id, name, JSON args);
//   - any other content → its FunctionResponse parts as "tool" messages
//     (tool_call_id = the response ID, content = the response map as JSON),
//     then its text parts as one "user" message;
//   - Config.Tools' function declarations → tools of type "function" with
//     the declaration's JSON schema as parameters;
//   - Temperature, TopP, MaxOutputTokens (as max_completion_tokens),
//     StopSequences, Seed and the function-calling mode;
//   - reasoning, when not "", as reasoning_effort ("low", "medium",
//     "high"), Chat Completions' own parameter for it.
//
// Thought parts are left out (they are the model's own, not conversation).
// Parts OpenAI chat cannot carry here (inline data, files, executable code)
// and non-function tools are errors rather than silently dropped.
func chatParams(name, reasoning string, req *model.LLMRequest) (oai.ChatCompletionNewParams, error) {
	p := oai.ChatCompletionNewParams{Model: shared.ChatModel(name)}
	if reasoning != "" {
		p.ReasoningEffort = shared.ReasoningEffort(reasoning)
	}
	cfg := req.Config
	if cfg == nil {
		cfg = &genai.GenerateContentConfig{}
	}
	if sys := wire.JoinText(cfg.SystemInstruction, "\n\n"); sys != "" {
		p.Messages = append(p.Messages, oai.SystemMessage(sys))
	}
	for i, c := range req.Contents {
		if c == nil {
			continue
		}
		msgs, err := contentMessages(c)
		if err != nil {
			return p, fmt.Errorf("contents[%d]: %w", i, err)
		}
		p.Messages = append(p.Messages, msgs...)
	}
	if len(p.Messages) == 0 {
		return p, fmt.Errorf("request has no messages")
	}

	fns, err := wire.Functions(cfg.Tools)
	if err != nil {
		return p, err
	}
	for _, f := range fns {
		fn := shared.FunctionDefinitionParam{Name: f.Name, Parameters: shared.FunctionParameters(f.Parameters)}
		if f.Description != "" {
			fn.Description = oai.String(f.Description)
		}
		p.Tools = append(p.Tools, oai.ChatCompletionFunctionTool(fn))
	}
	if tc := cfg.ToolConfig; tc != nil && tc.FunctionCallingConfig != nil && len(p.Tools) > 0 {
		fc := tc.FunctionCallingConfig
		switch fc.Mode {
		case genai.FunctionCallingConfigModeNone:
			p.ToolChoice = oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("none")}
		case genai.FunctionCallingConfigModeAny, genai.FunctionCallingConfigModeValidated:
			if len(fc.AllowedFunctionNames) == 1 {
				p.ToolChoice = oai.ToolChoiceOptionFunctionToolChoice(oai.ChatCompletionNamedToolChoiceFunctionParam{Name: fc.AllowedFunctionNames[0]})
			} else {
				p.ToolChoice = oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("required")}
			}
		}
	}

	if cfg.Temperature != nil {
		p.Temperature = oai.Float(f64(*cfg.Temperature))
	}
	if cfg.TopP != nil {
		p.TopP = oai.Float(f64(*cfg.TopP))
	}
	if cfg.MaxOutputTokens > 0 {
		p.MaxCompletionTokens = oai.Int(int64(cfg.MaxOutputTokens))
	}
	if len(cfg.StopSequences) > 0 {
		p.Stop = oai.ChatCompletionNewParamsStopUnion{OfStringArray: cfg.StopSequences}
	}
	if cfg.Seed != nil {
		p.Seed = oai.Int(int64(*cfg.Seed))
	}
	return p, nil
}

func contentMessages(c *genai.Content) ([]oai.ChatCompletionMessageParamUnion, error) {
	var (
		texts []string
		calls []oai.ChatCompletionMessageToolCallUnionParam
		tools []oai.ChatCompletionMessageParamUnion
	)
	for j, part := range c.Parts {
		switch {
		case part == nil, part.Thought:
		case part.FunctionCall != nil:
			fc := part.FunctionCall
			args := fc.Args
			if args == nil {
				args = map[string]any{}
			}
			raw, err := json.Marshal(args)
			if err != nil {
				return nil, fmt.Errorf("parts[%d]: encode arguments of %q: %w", j, fc.Name, err)
			}
			calls = append(calls, oai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
					ID:       fc.ID,
					Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: fc.Name, Arguments: string(raw)},
				},
			})
		case part.FunctionResponse != nil:
			fr := part.FunctionResponse
			resp := fr.Response
			if resp == nil {
				resp = map[string]any{}
			}
			raw, err := json.Marshal(resp)
			if err != nil {
				return nil, fmt.Errorf("parts[%d]: encode result of %q: %w", j, fr.Name, err)
			}
			tools = append(tools, oai.ToolMessage(string(raw), fr.ID))
		case part.Text != "":
			texts = append(texts, part.Text)
		case part.InlineData != nil, part.FileData != nil, part.ExecutableCode != nil, part.CodeExecutionResult != nil:
			return nil, fmt.Errorf("parts[%d]: %s parts are not supported by the openai provider", j, wire.PartKind(part))
		}
	}
	text := strings.Join(texts, "")

	if c.Role == genai.RoleModel {
		if text == "" && len(calls) == 0 {
			return nil, nil
		}
		var a oai.ChatCompletionAssistantMessageParam
		if text != "" {
			a.Content.OfString = oai.String(text)
		}
		a.ToolCalls = calls
		return []oai.ChatCompletionMessageParamUnion{{OfAssistant: &a}}, nil
	}
	if len(calls) > 0 {
		return nil, fmt.Errorf("function calls in a %q content", c.Role)
	}
	msgs := tools
	if text != "" {
		msgs = append(msgs, oai.UserMessage(text))
	}
	return msgs, nil
}

// f64 widens f to the float64 with the same shortest decimal form, so that
// 0.2 is sent as 0.2 and not as 0.20000000298023224.
func f64(f float32) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	return v
}
