package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agent-worker/agent-worker/access"
)

// CallerHeader carries, under a forward's seal, who the forwarding
// replica let in: the caller's token name, role and agents. A seal proves
// that a replica sent the request, not that any verb is allowed: the
// owner checks this caller's role and scope as it would its own.
const CallerHeader = "Agent-Worker-Caller"

// wireCaller is the caller as CallerHeader carries it.
type wireCaller struct {
	Name   string      `json:"name"`
	Role   access.Role `json:"role"`
	Agents []string    `json:"agents,omitempty"`
}

type callerKey struct{}

// WithCaller returns ctx carrying who made the request, for Do: a verb
// Do forwards to another replica goes with this caller, and the owner
// authorises it again. The API sets it for every request it lets in.
func WithCaller(ctx context.Context, who access.Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, who)
}

// callerOf returns the caller ctx carries (WithCaller), and whether it
// carries one.
func callerOf(ctx context.Context) (access.Caller, bool) {
	who, ok := ctx.Value(callerKey{}).(access.Caller)
	return who, ok
}

// errNoCaller: Do was asked to forward without a caller to forward.
var errNoCaller = errors.New("control: a forwarded request needs its caller (control.WithCaller)")

func encodeCaller(who access.Caller) string {
	b, _ := json.Marshal(wireCaller{Name: who.Name, Role: who.Role, Agents: who.Agents}) // plain strings: cannot fail
	return string(b)
}

// decodeCaller reads CallerHeader's value: a caller with a known role.
func decodeCaller(v string) (access.Caller, error) {
	if v == "" {
		return access.Caller{}, fmt.Errorf("the sealed forward names no caller (%s; a replica from before callers were forwarded? upgrade it)", CallerHeader)
	}
	var w wireCaller
	if err := json.Unmarshal([]byte(v), &w); err != nil {
		return access.Caller{}, fmt.Errorf("the sealed forward's %s is not JSON: %w", CallerHeader, err)
	}
	switch w.Role {
	case access.RoleRead, access.RoleIngest, access.RoleOperate:
	default:
		w.Name = ""
	}
	if w.Name == "" {
		return access.Caller{}, fmt.Errorf("the sealed forward's %s names no caller with a known role (%q, %q)", CallerHeader, w.Name, w.Role)
	}
	return access.Caller{Name: w.Name, Role: w.Role, Agents: w.Agents}, nil
}
