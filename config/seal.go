package config

import (
	"path/filepath"
	"strings"
)

// Seal names the deployment's sealing key (package seal): the secret that
// marks what the worker itself put on NATS (forwarded control verbs,
// subagent reports, the Alertmanager receiver's messages). It comes from a
// file or an environment variable the operator controls, never from the
// state a NATS client may read.
type Seal struct {
	// KeyFile and KeyEnv name the key (base64 of 32 random bytes): set
	// one. Every replica of a deployment must have the same key. Neither
	// set: the embedded default keeps a key of its own in
	// data_dir/seal.key, mode 0600, which only a single replica may do: a
	// deployment whose state is shared (nats.url, or a Redis store) should
	// set one, and the worker warns at start when it does not.
	KeyFile string `yaml:"key_file"`
	KeyEnv  string `yaml:"key_env"`
	// PreviousKeyFile and PreviousKeyEnv name the key being rotated out:
	// seals made with it still check, new seals use the key. Drop it once
	// every replica runs with the new key.
	PreviousKeyFile string `yaml:"previous_key_file"`
	PreviousKeyEnv  string `yaml:"previous_key_env"`
}

// Configured reports whether s names a key.
func (s Seal) Configured() bool { return s.KeyFile != "" || s.KeyEnv != "" }

// LocalSealFile is the key file the embedded default keeps in its data dir.
func (c *Config) LocalSealFile() string { return filepath.Join(c.DataDir, "seal.key") }

// SharedState reports whether replicas other than this one may read and
// write the same state (an external NATS server, or Redis): then they
// must share one sealing key.
func (c *Config) SharedState() bool {
	return c.NATS.URL != "" || strings.HasPrefix(c.Store.URL, "redis")
}

// seal checks the seal section: at most one source per key, and a
// previous key only beside a key. A shared state without a key is not an
// error here (a single replica on an external NATS may keep its own key);
// the worker warns at start.
func (v *validator) seal(c *Config) {
	var root path
	p := root.key("seal")
	s := c.Seal
	if s.KeyFile != "" && s.KeyEnv != "" {
		v.at(p.key("key_file"), "set one of key_file, key_env")
	}
	if s.PreviousKeyFile != "" && s.PreviousKeyEnv != "" {
		v.at(p.key("previous_key_file"), "set one of previous_key_file, previous_key_env")
	}
	if (s.PreviousKeyFile != "" || s.PreviousKeyEnv != "") && !s.Configured() {
		v.at(p.key("previous_key_file"), "a previous key needs the new one: set key_file or key_env too")
	}
}
