package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/agent-worker/agent-worker/config"
)

// Change is what a reload changed, or would change: the diff of the
// running config against the new one. A Change is computed whole before
// anything is applied, so a refused reload changes nothing.
type Change struct {
	// From and To are the content hashes (ConfigHash) of the running and
	// the new config; equal when nothing changed.
	From, To string
	// Added, Removed and Changed name agents, in the new (Added, Changed)
	// or old (Removed) file's order.
	Added, Removed, Changed []string
	// Why says, for each changed agent, which of its keys changed
	// ("instruction", "schedules", "models.main", ...).
	Why map[string][]string
	// Tokens: api.tokens changed (names, roles, scopes or where values
	// are read from); the values themselves are re-read on every reload.
	Tokens bool
	// MCPServers and Webhooks name the mcp_servers and webhooks entries
	// added, removed and changed (reload_mcp.go, reload_webhooks.go).
	MCPServers, Webhooks Keys
	// RestartOnly lists the changed keys that cannot change without a
	// restart, each as "file:line: key: why". Non-empty: the reload is
	// refused whole (ErrRestartRequired).
	RestartOnly []string
}

// Unchanged reports whether the new config is the running one (token
// values may still have been re-read).
func (c Change) Unchanged() bool { return c.From == c.To }

// ConfigHash is the content hash of cfg as the worker runs it (after
// defaults and ${ENV} expansion; the file's path is left out): 12 hex
// digits of SHA-256 over its JSON form. Secrets are never in a Config,
// only where to read them.
func ConfigHash(cfg *config.Config) string {
	c := *cfg
	c.File = ""
	data, err := json.Marshal(&c)
	if err != nil { // a Config is plain data; never happens
		data = fmt.Appendf(nil, "%#v", c)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// reloadable are the top-level keys a reload applies; every other key
// (data_dir, nats, store, api.listen, lease, ...) is read once at start,
// and a change of it refuses the reload. A key added to config.Config is
// restart-only until it is listed here and applied in reload.go.
var reloadable = map[string]bool{
	"api.tokens":  true,
	"models":      true,
	"memory":      true,
	"agents":      true,
	"pricing":     true,
	"mcp_servers": true,
	"webhooks":    true,
}

// agentRestartOnly are the keys of an agent that a reload cannot change
// in place: where it may run. Its subagents and spawn_subagent grant can
// change (reload_subagents.go). Its subscribe: subjects can change (reload_subscribe.go),
// and its wake_on_resolved (the API's table is swapped with the webhooks:
// reload_webhooks.go).
var agentRestartOnly = map[string]string{
	"replica_affinity": "the placement over the replicas is set up at start",
}

// diffConfig compares the running config with next: what a reload would
// add, remove and change, and which changed keys need a restart.
func diffConfig(old, next *config.Config) Change {
	ch := Change{From: ConfigHash(old), To: ConfigHash(next), Why: map[string][]string{}}
	for _, p := range diffPaths("", reflect.ValueOf(*old), reflect.ValueOf(*next)) {
		if reloadable[p] || reloadable[topKey(p)] {
			continue
		}
		ch.RestartOnly = append(ch.RestartOnly, next.Where(p)+": cannot change without a restart")
	}
	ch.Tokens = !reflect.DeepEqual(old.API.Tokens, next.API.Tokens)
	ch.MCPServers, ch.Webhooks = diffKeys(old.MCPServers, next.MCPServers), diffKeys(old.Webhooks, next.Webhooks)

	models := changedModels(old, next)
	memory := !reflect.DeepEqual(old.Memory, next.Memory)
	pricing := !reflect.DeepEqual(old.Pricing, next.Pricing)
	for i, a := range next.Agents {
		path := fmt.Sprintf("agents[%d]", i)
		prev, ok := old.Agent(a.Name)
		if !ok {
			ch.Added = append(ch.Added, a.Name)
			if why := addRestartOnly(a); why != "" {
				ch.RestartOnly = append(ch.RestartOnly, next.Where(path)+": adding agent "+a.Name+": "+why+"; needs a restart")
			}
			continue
		}
		var why []string
		for _, p := range diffPaths("", reflect.ValueOf(*prev), reflect.ValueOf(a)) {
			why = append(why, p)
			if reason := restartOnlyAgentKey(p, *prev, a); reason != "" {
				ch.RestartOnly = append(ch.RestartOnly, next.Where(path+"."+p)+": agent "+a.Name+": cannot change without a restart ("+reason+")")
			}
		}
		for _, key := range modelKeys(next, a) {
			if models[key] {
				why = append(why, "models."+key)
			}
		}
		if memory {
			why = append(why, "memory")
		}
		if pricing { // the ledger and the memory's cost keep the prices they were built with
			why = append(why, "pricing")
		}
		if len(why) > 0 {
			ch.Changed = append(ch.Changed, a.Name)
			ch.Why[a.Name] = slices.Compact(why)
		}
	}
	for i, a := range old.Agents {
		if _, ok := next.Agent(a.Name); !ok {
			ch.Removed = append(ch.Removed, a.Name)
			if why := addRestartOnly(a); why != "" {
				ch.RestartOnly = append(ch.RestartOnly, fmt.Sprintf("%s: removing agent %s: %s; needs a restart", old.Where(fmt.Sprintf("agents[%d]", i)), a.Name, why))
			}
		}
	}
	return ch
}

// addRestartOnly says why agent a cannot be added or removed without a
// restart ("" when it can).
func addRestartOnly(a config.Agent) string {
	if a.ReplicaAffinity != "" {
		return "it has a replica_affinity (" + agentRestartOnly["replica_affinity"] + ")"
	}
	return ""
}

// restartOnlyAgentKey says why the change of an agent's key p (a path
// under the agent) needs a restart, or "".
func restartOnlyAgentKey(p string, prev, next config.Agent) string {
	if why, ok := agentRestartOnly[topKey(p)]; ok {
		return why
	}
	return ""
}

// changedModels are the keys of models: whose definition differs (or
// that exist on one side only).
func changedModels(old, next *config.Config) map[string]bool {
	out := map[string]bool{}
	for k, m := range next.Models {
		if o, ok := old.Models[k]; !ok || !reflect.DeepEqual(o, m) {
			out[k] = true
		}
	}
	for k := range old.Models {
		if _, ok := next.Models[k]; !ok {
			out[k] = true
		}
	}
	return out
}

// modelKeys are the models: keys agent a's spec is built from: its
// model, its memory's, and each one's fallback chain.
func modelKeys(cfg *config.Config, a config.Agent) []string {
	var out []string
	for _, k := range []string{a.Model, a.Memory.Model} {
		for k != "" && !slices.Contains(out, k) {
			out = append(out, k)
			k = cfg.Models[k].Fallback
		}
	}
	return out
}

// topKey is the first key of a path: "nats" of "nats.listen", "agents"
// of "agents[2].name".
func topKey(p string) string {
	if i := strings.IndexAny(p, ".["); i >= 0 {
		return p[:i]
	}
	return p
}

// diffPaths lists the YAML paths where a and b (values of one struct
// type) differ, down to the leaves of nested structs; a list or a map
// that differs is one path. Fields without a yaml name are skipped.
func diffPaths(prefix string, a, b reflect.Value) []string {
	if a.Kind() != reflect.Struct {
		if reflect.DeepEqual(a.Interface(), b.Interface()) {
			return nil
		}
		return []string{prefix}
	}
	var out []string
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		p := name
		if prefix != "" {
			p = prefix + "." + name
		}
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[config.Duration]() {
			out = append(out, diffPaths(p, a.Field(i), b.Field(i))...)
			continue
		}
		if !reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			out = append(out, p)
		}
	}
	return out
}
