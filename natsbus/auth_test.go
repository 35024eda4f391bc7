package natsbus

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/agent-worker/agent-worker/config"
)

func secretFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every way of authenticating the embedded server admits the worker's own
// connection and turns a client without credentials away.
func TestEmbeddedServerAuthentication(t *testing.T) {
	t.Parallel()
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	for name, cfg := range map[string]config.NATS{
		"token":    {TokenFile: secretFile(t, "t0ken\n")},
		"password": {User: "worker", PasswordFile: secretFile(t, "pa55word")},
		"nkey":     {NKeyFile: secretFile(t, string(seed))},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg.Listen = "-1"
			c, err := Connect(cfg, t.TempDir(), nil)
			if err != nil {
				t.Fatalf("the worker's own connection was refused: %v", err)
			}
			defer c.Close()
			if err := c.NC.Publish("agents.a.inbox", []byte("hi")); err != nil {
				t.Fatal(err)
			}
			nc, err := nats.Connect(c.ClientURL, nats.Timeout(2*time.Second))
			if err == nil {
				nc.Close()
				t.Fatal("a client without credentials connected")
			}
			opts, err := ClientAuth(cfg)
			if err != nil {
				t.Fatal(err)
			}
			nc, err = nats.Connect(c.ClientURL, opts...)
			if err != nil {
				t.Fatalf("a client with the credentials was refused: %v", err)
			}
			nc.Close()
		})
	}
}

func TestEmbeddedServerRefusesToListenOpenly(t *testing.T) {
	t.Parallel()
	_, err := Connect(config.NATS{Listen: "0.0.0.0:0"}, t.TempDir(), nil)
	if !errors.Is(err, ErrOpenServer) {
		t.Fatalf("Connect on 0.0.0.0 without credentials: %v, want ErrOpenServer", err)
	}
}
