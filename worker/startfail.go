package worker

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/open"
)

// Start's failures fall in classes that errors.Is tells apart, so that
// the command exits with one code per class (docs/operations.md, "Exit
// codes") and a supervisor can tell "fix the file" from "free the port"
// from "wait for NATS". A failure in none of them is a plain error.
var (
	// ErrConfig: the configuration is wrong (exit 2): fix the file.
	ErrConfig = errors.New("configuration")
	// ErrListen: an address the worker must listen on (api.listen, the
	// embedded server's nats.listen) is taken, not this host's, or not
	// permitted (exit 3).
	ErrListen = errors.New("cannot listen")
	// ErrUnreachable: NATS at nats.url or the store did not answer at
	// start-up (exit 4): nothing to fix in the file; start again once it
	// is up.
	ErrUnreachable = errors.New("dependency unreachable")
)

// classed is err, matched by errors.Is as its class too; its text is
// err's alone.
type classed struct{ class, err error }

func (c classed) Error() string   { return c.err.Error() }
func (c classed) Unwrap() []error { return []error{c.class, c.err} }

// classify marks an error of natsbus.Connect or of opening the store with
// its class. The store opener marks the configuration's errors with its
// own open.ErrConfig, which is ErrConfig here.
func classify(err error) error {
	if errors.Is(err, open.ErrConfig) {
		err = classed{ErrConfig, err}
	}
	switch {
	case errors.Is(err, natsbus.ErrListen):
		return classed{ErrListen, err}
	case errors.Is(err, natsbus.ErrUnreachable), errors.Is(err, store.ErrUnreachable):
		return classed{ErrUnreachable, err}
	}
	return err
}

// apiListenError says why the API cannot listen on addr, as the embedded
// NATS server's does for nats.listen.
func apiListenError(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		err = fmt.Errorf("api.listen %s is already in use (another agent-worker?); set api.listen to a free port, or port 0 for a random one", addr)
	} else {
		err = fmt.Errorf("api.listen %s: %w", addr, err)
	}
	return classed{ErrListen, err}
}
