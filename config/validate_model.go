package config

import (
	"slices"
	"strings"
)

func (v *validator) model(c *Config, name string, m Model) {
	p := path{"models"}.key(name)
	v.oneOf(p.key("provider"), m.Provider, providers)
	v.modelSettings(c, name, m)
	if m.APIKeyEnv != "" && m.APIKeyFile != "" {
		v.at(p.key("api_key_file"), "api_key_env and api_key_file are mutually exclusive")
	}
	switch {
	case m.Provider == "scripted":
		v.scriptedModel(c, p, m)
	case slices.Contains(providers, m.Provider):
		v.providerModel(p, m)
	}
}

// providerModel checks a model served by a provider (not scripted): no
// scripted keys, a model name, a key, and non-negative bounds.
func (v *validator) providerModel(p path, m Model) {
	for _, k := range []struct {
		key string
		set bool
	}{{"script", len(m.Script) > 0}, {"script_file", m.ScriptFile != ""}, {"behaviour", m.Behaviour != ""}, {"loop", m.Loop}} {
		if k.set {
			v.at(p.key(k.key), "only for provider scripted, not %s", m.Provider)
		}
	}
	if m.Model == "" {
		v.at(p.key("model"), "required for provider %s (the provider's model name)", m.Provider)
	}
	if m.APIKeyEnv == "" && m.APIKeyFile == "" && !(m.Provider == "openai" && m.BaseURL != "") && !m.Vertex {
		v.at(p, "provider %s needs api_key_env or api_key_file (the key itself never goes in the config)", m.Provider)
	}
	if m.Vertex && (m.Provider != "gemini" || m.Project == "" || m.Location == "") {
		v.at(p.key("vertex"), "vertex needs provider gemini with project and location")
	}
	v.duration(p.key("timeout"), m.Timeout)
	if m.Retry.Max != nil && *m.Retry.Max < 0 {
		v.at(p.key("retry", "max"), "must not be negative; got %d", *m.Retry.Max)
	}
	if m.MaxTokens < 0 {
		v.at(p.key("max_tokens"), "must not be negative; got %d", m.MaxTokens)
	}
}

// scriptedModel checks a scripted model: exactly one of script,
// script_file and behaviour, and each script step. A step read from a
// script_file is reported at its line in that file.
func (v *validator) scriptedModel(c *Config, p path, m Model) {
	hasScript := len(m.Script) > 0 || m.ScriptFile != ""
	switch {
	case !hasScript && m.Behaviour == "":
		v.at(p, "a scripted model needs one of script, script_file, behaviour")
	case hasScript && m.Behaviour != "":
		v.at(p, "a scripted model needs exactly one of script, script_file, behaviour")
	case m.Behaviour != "" && !slices.Contains(behaviours, m.Behaviour):
		v.at(p.key("behaviour"), "unknown behaviour %q (known: %s)", m.Behaviour, strings.Join(behaviours, ", "))
	}

	file := v.file
	if m.ScriptFile != "" {
		file = scriptPath(c.File, m.ScriptFile)
	}
	for i, s := range m.Script {
		sp := p.key("script").index(i)
		line := s.Line
		if line == 0 && file == v.file {
			line = v.line(sp)
		}
		v.scriptStep(file, line, sp, s)
	}
}

// scriptStep checks one step of a script: one kind of step (text and call
// may go together), a named call, and no negative delay or usage.
func (v *validator) scriptStep(file string, line int, sp path, s ScriptStep) {
	var kinds []string
	for _, k := range []struct {
		name string
		set  bool
	}{{"text", s.Text != ""}, {"call", s.Call != nil}, {"error", s.Error != ""}, {"hang", s.Hang}} {
		if k.set {
			kinds = append(kinds, k.name)
		}
	}
	switch {
	case len(kinds) == 0:
		v.atLine(file, line, sp, "empty step: needs one of text, call, error, hang")
	case len(kinds) > 1 && !slices.Equal(kinds, []string{"text", "call"}):
		v.atLine(file, line, sp, "a step needs exactly one of text, call, error, hang (only text and call go together); got %s", strings.Join(kinds, " and "))
	}
	if s.Call != nil && s.Call.Name == "" {
		v.atLine(file, line, sp.key("call", "name"), "required")
	}
	if s.Delay < 0 {
		v.atLine(file, line, sp.key("delay"), "must not be negative; got %s", s.Delay.D())
	}
	for _, u := range []struct {
		key string
		n   int
	}{{"input", s.Usage.Input}, {"cached_input", s.Usage.CachedInput}, {"output", s.Usage.Output}} {
		if u.n < 0 {
			v.atLine(file, line, sp.key("usage", u.key), "must not be negative; got %d", u.n)
		}
	}
}

// pricing checks pricing.<model>: no negative price.
func (v *validator) pricing(c *Config) {
	var root path
	for _, name := range sortedKeys(c.Pricing) {
		p, pr := root.key("pricing", name), c.Pricing[name]
		v.nonNegative(p.key("input_per_mtok"), pr.InputPerMTok)
		v.nonNegative(p.key("cached_input_per_mtok"), pr.CachedInputPerMTok)
		v.nonNegative(p.key("output_per_mtok"), pr.OutputPerMTok)
	}
}
