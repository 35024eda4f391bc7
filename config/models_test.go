package config

import "testing"

func TestModelSettingsValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "reasoning levels and providers",
			yaml: `
models:
  a: {provider: openai, model: o4-mini, base_url: "http://llm:8000/v1", reasoning: high}
  b: {provider: anthropic, model: claude-sonnet-4-5, api_key_env: K, reasoning: extreme}
  c: {provider: gemini, model: gemini-2.5-flash, api_key_env: K, reasoning: High}
  fake: {provider: scripted, behaviour: demo, reasoning: low}
agents: [{name: x, model: a}]
`,
			want: []string{
				`config.yaml:3: models.b.reasoning: must be one of low, medium, high; got "extreme"`,
				`config.yaml:4: models.c.reasoning: must be one of low, medium, high; got "High"`,
				`config.yaml:5: models.fake.reasoning: only for providers openai, anthropic, gemini, not scripted (a script has no reasoning to tune)`,
			},
		},
		{
			name: "fallback unknown or itself",
			yaml: `
models:
  main:
    provider: openai
    model: gpt-4.1
    base_url: "http://llm:8000/v1"
    fallback: cheapo
  cheap: {provider: openai, model: gpt-4.1-nano, base_url: "http://llm:8000/v1", fallback: cheap}
agents: [{name: x, model: main}]
`,
			want: []string{
				`config.yaml:6: models.main.fallback: unknown model "cheapo" (models: cheap, main)`,
				`config.yaml:7: models.cheap.fallback: a model cannot be its own fallback`,
			},
		},
		{
			name: "fallbacks loop, reported once",
			yaml: `
models:
  main: {provider: openai, model: gpt-4.1, base_url: "http://llm:8000/v1", fallback: mid}
  mid: {provider: openai, model: gpt-4.1-mini, base_url: "http://llm:8000/v1", fallback: cheap}
  cheap: {provider: openai, model: gpt-4.1-nano, base_url: "http://llm:8000/v1", fallback: mid}
agents: [{name: x, model: main}]
`,
			want: []string{
				`config.yaml:4: models.cheap.fallback: fallbacks loop: cheap → mid → cheap`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, got := loadText(t, tt.yaml)
			if c != nil {
				t.Error("Load returned a config along with errors")
			}
			assertErrors(t, got, tt.want)
		})
	}
}

// A chain of fallbacks is fine, across providers, and so is reasoning on
// each real provider.
func TestModelSettingsAccepted(t *testing.T) {
	t.Parallel()
	c, errs := loadText(t, `
models:
  main: {provider: anthropic, model: claude-sonnet-4-5, api_key_env: K, reasoning: medium, fallback: mid}
  mid: {provider: gemini, model: gemini-2.5-flash, api_key_env: K, reasoning: low, fallback: cheap}
  cheap: {provider: openai, model: o4-mini, base_url: "http://llm:8000/v1", reasoning: high}
agents: [{name: x, model: main}]
`)
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	if m := c.Models["main"]; m.Reasoning != "medium" || m.Fallback != "mid" || c.Models["mid"].Fallback != "cheap" {
		t.Errorf("models = %+v", c.Models)
	}
}
