// Package wire holds what the providers share when they turn ADK/genai
// requests into their wire formats — tool parameter schemas, descriptions
// of genai content, reasoning budgets — and when they send them: the base
// URL check, the HTTP client behind the retry transport, the per-attempt
// timeout, the retry policy's logger and the secrets no error may show
// (sending.go). It must not know any provider's types.
package wire

import (
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/internal/textclip"
)

// Parameters returns the JSON schema of d's parameters as a JSON
// object. ADK's functiontool sets ParametersJsonSchema (a JSON schema value,
// usually a *jsonschema.Schema); hand-written tools may set Parameters (a
// *genai.Schema in OpenAPI style, with upper-case types). A declaration with
// neither takes no arguments: {"type": "object", "properties": {}}.
func Parameters(d *genai.FunctionDeclaration) (map[string]any, error) {
	switch {
	case d.ParametersJsonSchema != nil:
		raw, err := json.Marshal(d.ParametersJsonSchema)
		if err != nil {
			return nil, fmt.Errorf("tool %q: encode parameters schema: %w", d.Name, err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil || m == nil {
			return nil, fmt.Errorf("tool %q: parameters schema is not a JSON object: %s", d.Name, textclip.Bytes(string(raw), 80, "…"))
		}
		return m, nil
	case d.Parameters != nil:
		return genaiSchema(d.Parameters), nil
	default:
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
}

// genaiSchema converts an OpenAPI-style *genai.Schema to JSON schema:
// types are lower-cased, nullable becomes a ["t", "null"] type, and
// Gemini-only fields (propertyOrdering, example) are dropped.
func genaiSchema(s *genai.Schema) map[string]any {
	m := map[string]any{}
	if s == nil {
		return m
	}
	if s.Type != "" && s.Type != genai.TypeUnspecified {
		t := strings.ToLower(string(s.Type))
		if s.Nullable != nil && *s.Nullable {
			m["type"] = []any{t, "null"}
		} else {
			m["type"] = t
		}
	}
	set := func(k string, v any, ok bool) {
		if ok {
			m[k] = v
		}
	}
	set("title", s.Title, s.Title != "")
	set("description", s.Description, s.Description != "")
	set("format", s.Format, s.Format != "")
	set("pattern", s.Pattern, s.Pattern != "")
	set("enum", s.Enum, len(s.Enum) > 0)
	set("default", s.Default, s.Default != nil)
	set("required", s.Required, len(s.Required) > 0)
	for k, p := range map[string]*int64{
		"minItems": s.MinItems, "maxItems": s.MaxItems,
		"minLength": s.MinLength, "maxLength": s.MaxLength,
		"minProperties": s.MinProperties, "maxProperties": s.MaxProperties,
	} {
		if p != nil {
			m[k] = *p
		}
	}
	if s.Minimum != nil {
		m["minimum"] = *s.Minimum
	}
	if s.Maximum != nil {
		m["maximum"] = *s.Maximum
	}
	if len(s.Properties) > 0 {
		props := make(map[string]any, len(s.Properties))
		for k, p := range s.Properties {
			props[k] = genaiSchema(p)
		}
		m["properties"] = props
	} else if s.Type == genai.TypeObject {
		m["properties"] = map[string]any{}
	}
	if s.Items != nil {
		m["items"] = genaiSchema(s.Items)
	}
	if len(s.AnyOf) > 0 {
		anyOf := make([]any, len(s.AnyOf))
		for i, a := range s.AnyOf {
			anyOf[i] = genaiSchema(a)
		}
		m["anyOf"] = anyOf
	}
	return m
}

// Function is one function tool of a request, with its parameters'
// JSON schema.
type Function struct {
	Name        string
	Description string
	Parameters  map[string]any
}

// Functions lists the function tools of a request's tools. Other kinds of
// tool (search, code execution) are an error: the providers cannot carry
// them.
func Functions(tools []*genai.Tool) ([]Function, error) {
	var out []Function
	for _, t := range tools {
		if t == nil {
			continue
		}
		if len(t.FunctionDeclarations) == 0 {
			return nil, fmt.Errorf("only function tools are supported, got %s", ToolKind(t))
		}
		for _, d := range t.FunctionDeclarations {
			if d == nil {
				continue
			}
			schema, err := Parameters(d)
			if err != nil {
				return nil, err
			}
			out = append(out, Function{Name: d.Name, Description: d.Description, Parameters: schema})
		}
	}
	return out, nil
}
