package config

import (
	"fmt"
	"os"
	"strings"
)

// ReadSecret returns the secret a config names by environment variable
// (env) or file (file), without surrounding whitespace, or "" when it names
// neither: the key pairs api_key_env/api_key_file, value_env/value_file,
// password_env and token_env all go through here, so a secret is never
// taken from the config text itself. what is the keys' common prefix in
// error messages ("api_key" gives "api_key_env: ...").
func ReadSecret(what, env, file string) (string, error) {
	switch {
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok || strings.TrimSpace(v) == "" {
			return "", fmt.Errorf("%s_env: environment variable %s is not set", what, env)
		}
		return strings.TrimSpace(v), nil
	case file != "":
		data, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%s_file: %w", what, err)
		}
		return strings.TrimSpace(string(data)), nil
	}
	return "", nil
}
