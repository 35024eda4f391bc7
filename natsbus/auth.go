package natsbus

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/agent-worker/agent-worker/config"
)

// ErrOpenServer: the embedded server would listen beyond loopback with
// no authentication.
var ErrOpenServer = errors.New("refusing to run the embedded NATS server beyond loopback without authentication")

// ClientAuth returns the connection options for cfg's credentials: a
// creds file, an NKey seed, a user and password, a token (secrets read
// from their environment variable or file), and client TLS files.
func ClientAuth(cfg config.NATS) ([]nats.Option, error) {
	var opts []nats.Option
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.NKeyFile != "" {
		o, err := nats.NkeyOptionFromSeed(cfg.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("nats.nkey_file %s: %w", cfg.NKeyFile, err)
		}
		opts = append(opts, o)
	}
	if cfg.User != "" {
		pw, err := config.ReadSecret("nats.password", cfg.PasswordEnv, cfg.PasswordFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.UserInfo(cfg.User, pw))
	}
	if cfg.TokenEnv != "" || cfg.TokenFile != "" {
		tok, err := config.ReadSecret("nats.token", cfg.TokenEnv, cfg.TokenFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Token(tok))
	}
	if cfg.TLS.CAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.TLS.CAFile))
	}
	if cfg.TLS.CertFile != "" || cfg.TLS.KeyFile != "" {
		opts = append(opts, nats.ClientCert(cfg.TLS.CertFile, cfg.TLS.KeyFile))
	}
	return opts, nil
}

// serverAuth sets what the embedded server requires of every client —
// the worker's own connection included — from cfg: a token, a user and
// password, or the public key of an NKey seed. It refuses a listen
// address beyond loopback when cfg names none (ErrOpenServer): anyone who
// could reach it could publish into inboxes, send operator verbs on the
// control subjects and read the state store, past the API's tokens.
func serverAuth(o *server.Options, cfg config.NATS) error {
	switch {
	case cfg.TokenEnv != "" || cfg.TokenFile != "":
		tok, err := config.ReadSecret("nats.token", cfg.TokenEnv, cfg.TokenFile)
		if err != nil {
			return err
		}
		o.Authorization = tok
	case cfg.User != "":
		pw, err := config.ReadSecret("nats.password", cfg.PasswordEnv, cfg.PasswordFile)
		if err != nil {
			return err
		}
		o.Username, o.Password = cfg.User, pw
	case cfg.NKeyFile != "":
		seed, err := os.ReadFile(cfg.NKeyFile)
		if err != nil {
			return fmt.Errorf("nats.nkey_file: %w", err)
		}
		kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(seed))))
		if err != nil {
			return fmt.Errorf("nats.nkey_file %s: %w", cfg.NKeyFile, err)
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return fmt.Errorf("nats.nkey_file %s: %w", cfg.NKeyFile, err)
		}
		o.Nkeys = []*server.NkeyUser{{Nkey: pub}}
	default:
		if cfg.Listen != "-1" && cfg.Listen != "" && !config.IsLoopback(cfg.Listen) {
			return fmt.Errorf("%w: nats.listen %q; set nats.token_env or nats.token_file (or nats.user with password_env/password_file, or nats.nkey_file), or listen on 127.0.0.1", ErrOpenServer, cfg.Listen)
		}
	}
	return nil
}
