package control

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/access"
	"github.com/agent-worker/agent-worker/seal"
)

// AuthorizationHeader is the NATS header a control request carries its
// token in, as over HTTP: "Authorization: Bearer <token>".
const AuthorizationHeader = "Authorization"

// ByAnonymous is Request.By of a request on the control subject let in
// without a token (no api.tokens, the embedded NATS server on loopback):
// the name the API gives such a caller too.
const ByAnonymous = access.AnonymousName

// refusal is why a control request is not carried out: the reply's code
// and error.
type refusal struct {
	code int
	why  string
}

// asker is who sent a control request, as far as the owner can tell:
// the caller a sealed forward names (forwarded: a replica let it in; its
// role and scope are checked here again) or a caller a token (or no
// token, where allowed) stands for.
type asker struct {
	forwarded bool
	who       access.Caller
}

// authenticate finds who sent m. A request with a seal that checks is a
// replica's forward: fresh and not seen before, it stands for the caller
// it names (CallerHeader; 401 without one); stale or replayed, refused
// (401). A seal that does not check is logged, and the
// request is taken as unsealed: it needs a token of the set in force in
// its Authorization header (401 without one, or with one no token has);
// with no tokens, it is let in as anonymous only when Options.LoopbackNATS
// says nobody off this machine can reach the server (else 401).
func (c *Control) authenticate(m *nats.Msg, agent string) (asker, *refusal) {
	if m.Header.Get(seal.Header) != "" {
		ok, err := c.forwards.sealed(c.o.Seal, m, time.Now())
		switch {
		case ok && err == nil:
			who, err := decodeCaller(m.Header.Get(CallerHeader))
			if err != nil {
				c.o.Log.Warn("control forward refused", "agent", agent, "error", err)
				return asker{}, &refusal{http.StatusUnauthorized, err.Error()}
			}
			return asker{forwarded: true, who: who}, nil
		case errors.Is(err, errTooMany):
			c.o.Log.Warn("control forward refused", "agent", agent, "error", err)
			return asker{}, &refusal{http.StatusServiceUnavailable, fmt.Sprintf("%v (at most %d in %s); retry", err, maxForwards, ForwardWindow)}
		case ok:
			c.o.Log.Warn("control forward refused: a replay, or the replicas' clocks are apart", "agent", agent, "error", err)
			return asker{}, &refusal{http.StatusUnauthorized, fmt.Sprintf("%v; a forward is good once, within %s of its seal", err, ForwardWindow)}
		}
		c.o.Log.Warn("control request with a bad seal: taken as unsealed (a forged forward, another deployment's key, or a changed request)",
			"agent", agent)
	}
	set := c.o.Tokens.Load()
	if set.Empty() {
		if c.o.LoopbackNATS {
			return asker{who: set.Anonymous()}, nil
		}
		c.o.Log.Warn("control request refused: no api.tokens, and NATS is reachable beyond this machine", "agent", agent)
		return asker{}, &refusal{http.StatusUnauthorized, "control over NATS needs a token: api.tokens is empty and this worker's NATS is not its embedded server on loopback (nats.url is set, or nats.listen reaches beyond loopback); add a token to api.tokens (role operate, or read for view, inbox, message, memory and approvals) and send it in the NATS header " + AuthorizationHeader + ": Bearer <token>"}
	}
	presented, ok := access.Bearer(m.Header.Get(AuthorizationHeader))
	if !ok {
		c.o.Log.Warn("control request without a token", "agent", agent)
		return asker{}, &refusal{http.StatusUnauthorized, "missing bearer token: send the NATS header " + AuthorizationHeader + ": Bearer <token>"}
	}
	who, ok := set.Authenticate(presented)
	if !ok {
		c.o.Log.Warn("control request with an invalid token", "agent", agent)
		return asker{}, &refusal{http.StatusUnauthorized, "invalid bearer token"}
	}
	return asker{who: who}, nil
}

// authorise refuses (403) a verb the caller's role does not allow
// (Need), and an agent outside its agents: a forward's caller too.
func (a asker) authorise(agent, verb string) *refusal {
	if need := Need(verb); !need.Allows(a.who.Role) {
		return &refusal{http.StatusForbidden, fmt.Sprintf("token %q has role %q; verb %q needs role %s", a.who.Name, a.who.Role, verb, need.Roles())}
	}
	if !a.who.MayAccess(agent) {
		return &refusal{http.StatusForbidden, fmt.Sprintf("token %q may not act on agent %q (its agents: %s)", a.who.Name, agent, strings.Join(a.who.Agents, ", "))}
	}
	return nil
}
