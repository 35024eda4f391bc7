package mcptools

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/agent-worker/agent-worker/config"
)

// minimalEnv are the worker's variables every command server gets, each
// when set: where programs are (PATH), a home and a temporary directory
// some runtimes (npx, uvx) need, the time zone, and the locale, so the
// server reads and writes text as the worker does. None of them is a
// secret by convention; a proxy or CA-bundle variable is not here (a
// proxy URL may hold a password): name it in inherit_env.
var minimalEnv = []string{
	"PATH", "HOME", "TMPDIR", "TZ",
	"LANG", "LC_ALL", "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES", "LC_MONETARY", "LC_NUMERIC", "LC_TIME",
}

// commandEnv is the environment of cfg's command: minimalEnv and the
// inherit_env names as lookup finds them, then cfg.Env, which wins. It is
// never the worker's whole environment: its model keys, API tokens and
// cloud credentials stay out unless inherit_env names them. A name of
// inherit_env that lookup does not find is an error (set but empty is
// set, and passed on).
func commandEnv(cfg config.MCPServer, lookup func(string) (string, bool)) ([]string, error) {
	vars := map[string]string{}
	for _, k := range minimalEnv {
		if v, ok := lookup(k); ok {
			vars[k] = v
		}
	}
	for _, k := range cfg.InheritEnv {
		v, ok := lookup(k)
		if !ok {
			return nil, fmt.Errorf("inherit_env: environment variable %s is not set in the worker's environment", k)
		}
		vars[k] = v
	}
	maps.Copy(vars, cfg.Env)
	env := make([]string, 0, len(vars))
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, k+"="+vars[k])
	}
	return env, nil
}

// osEnv is commandEnv of the worker's own environment.
func osEnv(cfg config.MCPServer) ([]string, error) {
	if len(cfg.Command) == 0 {
		return nil, nil
	}
	return commandEnv(cfg, os.LookupEnv)
}
