package config

import (
	"slices"
	"testing"
)

// Webhooks are checked with file:line: a name fit for a URL path and a
// metric label, a known agent, a known format and mode, text required for
// json, and templates that parse as the API will parse them.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	const head = "models: {m: {provider: scripted, script: [{text: ok}]}}\nagents: [{name: oncall, model: m}, {name: ci-bot, model: m}]\n"
	for _, c := range []struct {
		name, yaml string
		errs       []string
	}{
		{"ok", `
webhooks:
  ci:
    agent: ci-bot
    text: "{{.repository}}: build {{.build}} {{.status}} {{json .labels}} {{join .tags \", \"}}"
    id: "{{.repository}}-{{.build}}"
    mode: deferred
  grafana: {agent: oncall, format: grafana}
  am: {agent: oncall, format: alertmanager, text: "{{.status}}: {{len .alerts}} alerts"}
`, nil},
		{"bad name, agent, format, mode", `
webhooks:
  Bad.Name: {agent: oncall, text: x}
  nobody:
    agent: ghost
    text: x
  noagent: {text: x}
  fmt:
    agent: oncall
    format: xml
    mode: wake
`, []string{
			`config.yaml:5: webhooks["Bad.Name"]: webhook name "Bad.Name" must match ^[a-z0-9_-]+$ (it is a URL path token and labels metrics)`,
			`config.yaml:7: webhooks.nobody.agent: unknown agent "ghost" (agents: oncall, ci-bot)`,
			`config.yaml:9: webhooks.noagent.agent: required: the name of the agent the webhook's messages are for`,
			`config.yaml:12: webhooks.fmt.format: must be one of json, grafana, alertmanager; got "xml"`,
			`config.yaml:13: webhooks.fmt.mode: must be one of inbox, deferred; got "wake"`,
		}},
		{"templates", `
webhooks:
  notext:
    agent: oncall
    format: json
  broken:
    agent: oncall
    text: |
      build {{.build}}
      status {{.status
    id: "{{nosuchfunc .x}}"
`, []string{
			`config.yaml:5: webhooks.notext.text: required with format json: a Go template over the JSON body, such as "{{.repository}}: build {{.status}}"`,
			`config.yaml:10: webhooks.broken.text: template does not parse: template: webhooks.broken.text:3: unclosed action started at webhooks.broken.text:2`,
			`config.yaml:13: webhooks.broken.id: template does not parse: template: webhooks.broken.id:1: function "nosuchfunc" not defined`,
		}},
	} {
		cfg, errs := loadText(t, head+c.yaml)
		if !slices.Equal(errs, c.errs) {
			t.Errorf("%s: errors\n  %q\nwant\n  %q", c.name, errs, c.errs)
			continue
		}
		if c.errs == nil {
			if w := cfg.Webhooks["grafana"]; w.Mode != "inbox" || w.Format != "grafana" {
				t.Errorf("defaults of grafana: %+v", w)
			}
			if w := cfg.Webhooks["ci"]; w.Format != "json" || w.Mode != "deferred" || w.Agent != "ci-bot" {
				t.Errorf("ci: %+v", w)
			}
		}
	}
}
