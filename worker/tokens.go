package worker

import (
	"errors"

	"github.com/agent-worker/agent-worker/access"
	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/config"
)

// apiTokens reads the tokens' values from their env vars or files.
func apiTokens(in []config.Token) ([]api.Token, error) {
	var out []api.Token
	for _, t := range in {
		v, err := config.ReadSecret("api.tokens "+t.Name+" value", t.ValueEnv, t.ValueFile)
		if err != nil {
			return nil, err
		}
		out = append(out, api.Token{Name: t.Name, Role: api.Role(t.Role), Value: v, Agents: t.Agents})
	}
	return out, nil
}

// loadTokens reads the tokens' values and checks them.
func loadTokens(in []config.Token) (*access.Tokens, error) {
	tokens, err := apiTokens(in)
	if err != nil {
		return nil, err
	}
	set, err := access.NewSet(tokens)
	if err != nil {
		return nil, err
	}
	return access.NewTokens(set), nil
}

// ReloadTokens re-reads the values of the operator API's tokens
// (api.tokens value_file, value_env) and swaps them in atomically with
// api.Server.SetTokens, for the API and the NATS control subject alike
// (they share one set): from its return a replaced value gets 401 and the
// new one is accepted. Names, roles and agents stay as the config the
// worker started with. On any error — a file that cannot be read, a token
// left without a value, an empty set beyond loopback — the tokens in
// force stay and nothing changes. The error never holds a token value.
func (w *Worker) ReloadTokens() error {
	if w.api == nil {
		return errors.New("the operator API is not running")
	}
	tokens, err := apiTokens(w.Config().API.Tokens)
	if err != nil {
		return err
	}
	return w.api.SetTokens(tokens)
}
