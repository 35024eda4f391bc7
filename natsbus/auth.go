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

// serverAuth sets how the embedded server tells its clients apart
// (clientAccess): the worker's own connections log in with a password
// made at start; a client with the credential cfg names (a token, a user
// and password, an NKey seed's public key), or without any where cfg
// names none, gets a publisher's permissions only. It refuses a listen
// address beyond loopback when cfg names no credential (ErrOpenServer):
// anyone who could reach it could publish into every inbox.
func serverAuth(o *server.Options, cfg config.NATS, a *clientAccess) error {
	switch {
	case cfg.TokenEnv != "" || cfg.TokenFile != "":
		tok, err := config.ReadSecret("nats.token", cfg.TokenEnv, cfg.TokenFile)
		if err != nil {
			return err
		}
		a.token = tok
	case cfg.User != "":
		pw, err := config.ReadSecret("nats.password", cfg.PasswordEnv, cfg.PasswordFile)
		if err != nil {
			return err
		}
		a.user, a.password = cfg.User, pw
	case cfg.NKeyFile != "":
		seed, err := os.ReadFile(cfg.NKeyFile)
		if err != nil {
			return fmt.Errorf("nats.nkey_file: %w", err)
		}
		kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(seed))))
		if err != nil {
			return fmt.Errorf("nats.nkey_file %s: %w", cfg.NKeyFile, err)
		}
		if a.nkey, err = kp.PublicKey(); err != nil {
			return fmt.Errorf("nats.nkey_file %s: %w", cfg.NKeyFile, err)
		}
		o.AlwaysEnableNonce = true
	default:
		if cfg.Listen != "-1" && cfg.Listen != "" && !config.IsLoopback(cfg.Listen) {
			return fmt.Errorf("%w: nats.listen %q; set nats.token_env or nats.token_file (or nats.user with password_env/password_file, or nats.nkey_file), or listen on 127.0.0.1", ErrOpenServer, cfg.Listen)
		}
		a.anonymous = true
	}
	o.CustomClientAuthentication = a
	return nil
}
