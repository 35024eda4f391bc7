// Package control is the operator's verbs on an agent — pause, resume,
// interrupt, wake, guardrail reset, schedule run and the agent's view — as
// one request/reply shape shared by every transport (the NATS control
// subject and the HTTP API). It goes through the driver's, the guard's and
// the scheduler's own methods, so it cannot bypass the gate.
//
// # One owner, one truth
//
// Several replicas may run the same agents; each agent has one owner at a
// time (its lease). A verb is carried out by the owner, wherever it was
// sent, and answered with the owner's result:
//
//   - Control.Do applies the verb here when this replica owns the agent
//     (Options.Owner), without a round trip; otherwise it forwards it as
//     a NATS request on the agent's control subject
//     (<prefix>.<agent>.control) and returns the reply.
//   - Control.ServeNATS keeps one wildcard subscription on every replica
//     and answers only for the agents this replica owns. For any other
//     agent (standby, unknown) it stays silent — no reply at all — so a
//     requester gets the owner's reply and never a standby's.
//   - When no owner answers within Options.Timeout (DefaultTimeout), or
//     nobody listens on the subject at all, Do returns an error wrapping
//     ErrNoOwner: never a made-up success.
//
// # Wire protocol
//
// A request is a JSON Request; a reply a JSON Reply. Verbs:
//
//	verb          request fields                 reply (code, result)
//	pause         -                              200 state
//	resume        message, drop_queued           200 state, dropped (with drop_queued); 409 stopped
//	interrupt     hold (default true)            200 state, turn_running
//	wake          message                        200; 409 paused, halted or stopped
//	steer         message                        202 result driver.Steered: the running turn takes it
//	                                             before its next model call (turn), or it woke the
//	                                             agent (woke); 400 blank; 409 paused, halted, stopped
//	reset         guardrail, add_budget_usd      200 result guard.ResetResult;
//	                                             409 result Refusal (the owner's numbers);
//	                                             400 bad guardrail or amount; 404 no guardrails;
//	                                             503 not loaded yet / not the owner
//	run_schedule  schedule                       202 result ScheduleRun; 404 unknown schedule;
//	                                             409 gated
//	view          -                              200 result: the owner's agent view (JSON)
//	inbox         -                              200 result Inbox: the owner's queued messages
//	message       message_id                     200 result driver.MessageState: queued, running (turn),
//	                                             handled (turn, within the history window) or unknown here
//	memory        -                              200 result driver.MemoryView
//	memory_compact -                             202 result driver.MemoryView (the fold is queued);
//	                                             409 memory off, halted or stopped
//	memory_clear  -                              200 result driver.MemoryView; 503 not the owner
//	approvals     -                              200 result []approval.Request (pending)
//	approve       approval_id                    202 result {decision, request}: decided; the call
//	                                             runs and wakes the agent; 404 unknown id
//	deny          approval_id                    200 result {decision, request}; 404 unknown id
//	ask           question                       200 result AskAnswer: the owner's answer, nothing written;
//	                                             409 result AskRefusal (halted, a ceiling: the guardrail;
//	                                             another ask running); 400 no question; 502 the model
//	                                             failed; 504 no answer within Options.AskTimeout
//	model         model ("" the config's),       200 result driver.ModelView; 422 result ModelRefusal
//	              reasoning_effort               (unknown model: the configured ones; effort refused);
//	                                             503 not the owner / store failed: nothing changed
//
// # Who may send a verb
//
// The control subject takes the same credentials as the HTTP API, checked
// against the same token set (Options.Tokens: the API's, so a rotation
// reaches both): a request carries its token in the NATS header
// "Authorization: Bearer <token>", and the verb needs the role the API's
// route for it needs (Need: read for view, inbox, message, memory and
// approvals; operate for every other verb) and an agent within the
// token's agents. No token, or one no token has: 401; the wrong role or
// agent: 403; the reply's error says what to send or configure.
//
// With no tokens configured, a request without one is accepted only when
// the worker's NATS is its embedded server on loopback
// (Options.LoopbackNATS; nobody off the machine can reach it, as nobody
// can reach an API without tokens), and is by "anonymous" (ByAnonymous).
// Otherwise (an external server, or the embedded one beyond loopback) it
// is refused (401): configure api.tokens.
//
// A verb Do forwards to the owner is sealed with the deployment's key
// (Options.Seal, package seal: over the subject, the time it was sealed,
// a nonce, the caller and the body). The caller is the one the context
// carries (WithCaller: the API's token name, role and agents). A seal
// proves that a replica sent the request, never that any verb is
// allowed: the owner checks the named caller's role and agents again
// (403) and carries the verb out by that caller's name — once, and only
// within ForwardWindow of its seal: a captured forward replayed is
// refused (401), and so is a sealed forward that names no caller. A
// request whose seal does not check is logged and taken as unsealed: it
// needs a token.
//
// # Audit
//
// Every request may say why (reason). The changing verbs (pause, resume,
// interrupt, wake, steer, reset, approve, deny, model, ask) put who asked
// (by) and why in the events they cause, and a pause and a model switch
// keep them in their stored records. Who asked is the caller's token name — over HTTP and on the control subject
// alike; a "by" in the request body is overwritten — or "anonymous"
// without tokens. A forward is by the caller it names, so the owner's
// events name the original caller. Reasons are cut to MaxReason runes.
//
// Every reply names the replica that answered (owner) and carries code,
// the HTTP status the outcome maps to; ok is code < 300. Any verb on an
// agent the answering replica is still taking over (its driver not yet in
// step with the lease) is 503: retry.
//
// Not guaranteed: replicas of an older version answer every agent's
// control subject, standby or not, so during a rolling upgrade a request
// may still get a stale standby's reply; and they forward verbs unsealed,
// which an upgraded owner refuses (401) like any request without a token:
// send verbs to upgraded replicas, or retry once the upgrade is done.
package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/access"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/scheduler"
	"github.com/agent-worker/agent-worker/seal"
)

// Verbs.
const (
	VerbPause     = "pause"
	VerbResume    = "resume"
	VerbInterrupt = "interrupt"
	VerbWake      = "wake"
	// VerbReset lifts a guardrail trip and/or adds budget (guard.Reset).
	VerbReset = "reset"
	// VerbRunSchedule fires one of the agent's schedules now.
	VerbRunSchedule = "run_schedule"
	// VerbView returns the agent's view as its owner sees it.
	VerbView = "view"
	// VerbInbox lists the messages queued in the agent's inbox on its
	// owner (Inbox).
	VerbInbox = "inbox"
	// VerbMessage looks one message up in the owner's memory (queued, in
	// the running turn, handled by a turn of the history window):
	// driver.Agent.Message.
	VerbMessage = "message"
	// VerbMemory, VerbMemoryCompact and VerbMemoryClear show, fold and
	// clear the agent's running memory on its owner (memory.go).
	VerbMemory        = "memory"
	VerbMemoryCompact = "memory_compact"
	VerbMemoryClear   = "memory_clear"
	// VerbApprovals lists the agent's pending approvals; VerbApprove and
	// VerbDeny decide one (Request.ApprovalID).
	VerbApprovals = "approvals"
	VerbApprove   = "approve"
	VerbDeny      = "deny"
)

// MaxReason bounds Request.Reason, in runes: a longer reason is cut (the
// HTTP API refuses one instead).
const MaxReason = 500

// DefaultTimeout bounds a forwarded request: how long Do waits for the
// owner's reply before it gives up with ErrNoOwner.
const DefaultTimeout = 2 * time.Second

// ErrNoOwner is matched (errors.Is) by Do's error when no replica
// answered for the agent: none owns it right now (its owner died and the
// lease has not moved yet), or NATS is out of reach. The error itself is
// a *NoOwnerError.
var ErrNoOwner = errors.New("no replica owns the agent right now")

// NoOwnerError says which agent had no owner to answer, and why.
type NoOwnerError struct {
	Agent string
	// Why in words: no responder, no answer within the timeout, NATS down.
	Why string
	// Unknown: this replica cannot tell who owns the agent — its NATS
	// connection is down, or its own lease on the agent is in doubt
	// (Doubter) — rather than that no owner answered.
	Unknown bool
}

// Error reads "no replica owns agent "x" right now (why)", or, Unknown,
// "owner of agent "x" unknown right now: why; retry".
func (e *NoOwnerError) Error() string {
	if e.Unknown {
		return fmt.Sprintf("owner of agent %q unknown right now: %s; retry", e.Agent, e.Why)
	}
	return fmt.Sprintf("no replica owns agent %q right now (%s)", e.Agent, e.Why)
}

// Unwrap makes errors.Is(err, ErrNoOwner) hold.
func (e *NoOwnerError) Unwrap() error { return ErrNoOwner }

// Request is an operator's request.
type Request struct {
	Verb string `json:"verb"`
	// Message goes with resume (and wake) as a trusted operator
	// instruction for the next turn.
	Message string `json:"message,omitempty"`
	// Hold, with interrupt, also pauses the agent. Default true.
	Hold *bool `json:"hold,omitempty"`
	// Guardrail and AddBudgetUSD go with reset.
	Guardrail    string  `json:"guardrail,omitempty"`
	AddBudgetUSD float64 `json:"add_budget_usd,omitempty"`
	// Schedule goes with run_schedule.
	Schedule string `json:"schedule,omitempty"`
	// Question goes with ask: the operator's question (at most
	// driver.MaxQuestionBytes).
	Question string `json:"question,omitempty"`
	// MessageID goes with message: the id looked up.
	MessageID string `json:"message_id,omitempty"`
	// ApprovalID goes with approve and deny.
	ApprovalID string `json:"approval_id,omitempty"`
	// Model and ReasoningEffort go with model: a key of the config's
	// models: ("" for the config's own model) and "low", "medium" or
	// "high" ("" for the model's own).
	Model           string `json:"model,omitempty"`
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// DropQueued, with resume, abandons every queued message first: each
	// is dead-lettered with reason operator_dropped (driver.Agent.ResumeAs)
	// and Reply.Dropped counts them.
	DropQueued bool `json:"drop_queued,omitempty"`
	// By names who asks: the API token's name (ByAnonymous without
	// tokens). On the control subject the owner sets it to the name of
	// the token the request carries, whatever the body says; only a
	// replica's sealed forward keeps the by it names.
	By string `json:"by,omitempty"`
	// Reason is the operator's reason, free text, optional; it goes into
	// the events and the stored pause.
	Reason string `json:"reason,omitempty"`
}

// Audit returns the request's audit fields for the driver and the guard,
// with the reason cut to MaxReason runes.
func (r Request) Audit() hook.Audit {
	return hook.Audit{By: r.By, Reason: textclip.Runes(strings.TrimSpace(r.Reason), MaxReason, "")}
}

// Reply answers a Request.
type Reply struct {
	OK    bool   `json:"ok"`
	Agent string `json:"agent,omitempty"`
	Verb  string `json:"verb,omitempty"`
	// State is the agent's state after the verb.
	State string `json:"state,omitempty"`
	// TurnRunning, for interrupt: whether a turn was cancelled.
	TurnRunning *bool `json:"turn_running,omitempty"`
	// Dropped, for resume with drop_queued: how many queued messages
	// were abandoned (dead-lettered with reason operator_dropped).
	Dropped *int   `json:"dropped,omitempty"`
	Error   string `json:"error,omitempty"`
	// Code is the HTTP status the outcome maps to (see the package
	// documentation). A reply without one (an older replica) means 200
	// when OK and 409 otherwise.
	Code int `json:"code,omitempty"`
	// Owner names the replica that carried the verb out (its
	// lease.holder).
	Owner string `json:"owner,omitempty"`
	// Result is the verb's payload: guard.ResetResult or Refusal for
	// reset, ScheduleRun for run_schedule, the agent view for view.
	Result json.RawMessage `json:"result,omitempty"`
}

// Status is the HTTP status r maps to.
func (r Reply) Status() int {
	switch {
	case r.Code != 0:
		return r.Code
	case r.OK:
		return http.StatusOK
	}
	return http.StatusConflict
}

// Refusal is the result of a reset that would trip again at once (409):
// the owner's spend, ceiling and the least budget that would do.
type Refusal struct {
	Error string `json:"error"`
	*guard.RefusedError
}

// Inbox is the result of inbox: the messages queued on the agent's owner,
// oldest first (ids, sources, kinds, sizes, ages; not their text), and the
// counts. Messages a running turn took are not queued; messages JetStream
// holds back while the inbox is at its cap are not delivered yet, so not
// listed.
type Inbox struct {
	Agent    string                 `json:"agent"`
	Owner    string                 `json:"owner,omitempty"`
	Pending  int                    `json:"inbox_pending"`
	Deferred int                    `json:"deferred_pending"`
	Cap      int                    `json:"inbox_cap"`
	Messages []driver.QueuedMessage `json:"messages"`
}

// ScheduleRun is the result of run_schedule (202).
type ScheduleRun struct {
	Queued   bool       `json:"queued"`
	Agent    string     `json:"agent"`
	Schedule string     `json:"schedule"`
	NextFire *time.Time `json:"next_fire,omitempty"`
}

// Owner says whether this replica owns an agent: holds its lease, so it
// alone runs it and writes its durable state. lease.Manager's Held is
// one, through an adapter.
type Owner interface {
	Owns(agent string) bool
}

// Doubter is an Owner that can tell when its word on an agent it owns
// is in doubt (in the worker, the lease manager: a lease whose renewal
// has not been confirmed for so long that another replica may have taken
// it). Doubt returns why, or "" when sure. For an agent in doubt Control
// neither applies a verb, nor answers a forwarded one, nor forwards: Do
// returns a NoOwnerError that says the owner is unknown, so that no
// replica answers with a view that may be stale or a verb that may be
// lost.
type Doubter interface {
	Doubt(agent string) string
}

// Options configure a Control.
type Options struct {
	// Driver is required.
	Driver *driver.Driver
	// Guard serves reset; nil: reset answers 404.
	Guard *guard.Guard
	// Scheduler serves run_schedule; default Driver.Scheduler().
	Scheduler *scheduler.Scheduler
	// View returns the agent's view as this replica sees it, as JSON
	// (the api package supplies it: api.LocalView). It is called on the
	// owner only. Nil: view answers 404.
	View func(agent string) (json.RawMessage, error)
	// Owner says which agents this replica owns. Nil: it owns every
	// agent (one replica): Do never forwards and ServeNATS answers for
	// every agent.
	Owner Owner
	// Holder names this replica in replies (lease.holder).
	Holder string
	// Conn reaches the other replicas; nil: Do cannot forward, and an
	// agent not owned here is ErrNoOwner.
	Conn     *nats.Conn
	Subjects natsbus.Subjects
	// Timeout bounds a forwarded request; default DefaultTimeout. A
	// forwarded ask may take AskTimeout more.
	Timeout time.Duration
	// AskTimeout bounds an ask on the owner: no answer by then is 504;
	// default driver.DefaultAskTimeout.
	AskTimeout time.Duration
	// Tokens are the credentials a request on the control subject must
	// present (the HTTP API's: api.Options.Access), read afresh for each
	// request. Nil: no tokens.
	Tokens *access.Tokens
	// LoopbackNATS says that nobody off this machine can reach the NATS
	// server (the worker's embedded one, listening on loopback only):
	// with no tokens, requests without one are then carried out, by
	// ByAnonymous. False (an external server, or the embedded one beyond
	// loopback): with no tokens, every unsealed request is refused (401).
	LoopbackNATS bool
	// Seal is the deployment's key: Do seals the verbs it forwards with
	// it, and ServeNATS trusts the by of requests whose seal checks. The
	// zero Key seals nothing, so forwards need a token like any request
	// (and, with tokens configured, are refused).
	Seal seal.Key
	Log  *slog.Logger // default: discard
}

// Control carries operator verbs to agents' owners. It is safe for
// concurrent use.
type Control struct {
	o        Options
	forwards forwards // sealed forwards served within the window
}

// New checks o and returns a Control.
func New(o Options) (*Control, error) {
	if o.Driver == nil {
		return nil, errors.New("control: a driver is required")
	}
	if o.Scheduler == nil {
		o.Scheduler = o.Driver.Scheduler()
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.AskTimeout <= 0 {
		o.AskTimeout = driver.DefaultAskTimeout
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Tokens == nil {
		o.Tokens = access.NewTokens(nil)
	}
	return &Control{o: o}, nil
}

// Holder names this replica (Options.Holder).
func (c *Control) Holder() string { return c.o.Holder }

// owns reports whether this replica owns agent.
func (c *Control) owns(agent string) bool { return c.o.Owner == nil || c.o.Owner.Owns(agent) }

// doubt is why this replica's ownership of agent is in doubt (Doubter),
// or "".
func (c *Control) doubt(agent string) string {
	if d, ok := c.o.Owner.(Doubter); ok {
		return d.Doubt(agent)
	}
	return ""
}

// Do carries req out on agent's owner and returns the owner's reply: here
// when this replica owns the agent, otherwise over NATS. The error, which
// wraps ErrNoOwner, says why no owner answered (no responder, timeout,
// NATS down); a reply with OK false is the owner's refusal, not an error.
func (c *Control) Do(ctx context.Context, agent string, req Request) (Reply, error) {
	if why := c.doubt(agent); why != "" {
		return Reply{}, &NoOwnerError{Agent: agent, Why: why, Unknown: true}
	}
	if c.owns(agent) {
		return c.apply(ctx, agent, req), nil
	}
	if c.o.Conn == nil {
		return Reply{}, &NoOwnerError{Agent: agent, Why: "this replica does not, and has no NATS connection to reach one that does"}
	}
	if !c.o.Conn.IsConnected() {
		// Asking would wait out the timeout in the reconnect buffer and
		// then guess "no owner": say what is known instead.
		return Reply{}, &NoOwnerError{Agent: agent, Why: "NATS " + strings.ToLower(c.o.Conn.Status().String()) + ": this replica cannot reach the agent's owner", Unknown: true}
	}
	data, err := json.Marshal(req)
	if err != nil {
		return Reply{}, err
	}
	timeout := c.forwardTimeout(req.Verb)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	who, ok := callerOf(ctx)
	if !ok {
		return Reply{}, errNoCaller
	}
	subject := c.o.Subjects.Control(agent)
	msg := &nats.Msg{Subject: subject, Data: data}
	// Real time, not an injected clock: the owner compares it with its
	// own, in another process.
	sealForward(c.o.Seal, msg, who, time.Now())
	m, err := c.o.Conn.RequestMsgWithContext(ctx, msg)
	if err != nil {
		why := "NATS: " + err.Error()
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			why = "no replica listens on " + subject
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
			why = fmt.Sprintf("no owner answered on %s within %s", subject, timeout)
		}
		return Reply{}, &NoOwnerError{Agent: agent, Why: why}
	}
	var r Reply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return Reply{}, fmt.Errorf("the owner of agent %q sent a reply that is not JSON: %w", agent, err)
	}
	return r, nil
}

// Apply carries req out on agent here, as its owner. It refuses (503) an
// agent this replica does not own or is still taking over, so a verb never
// acts on a standby.
func (c *Control) Apply(agent string, req Request) Reply {
	return c.apply(context.Background(), agent, req)
}

// apply is Apply within ctx: an ask ends when ctx does (its caller went
// away); the other verbs do not wait on it.
func (c *Control) apply(ctx context.Context, agent string, req Request) Reply {
	r := Reply{Agent: agent, Verb: req.Verb, Owner: c.o.Holder}
	a, err := c.o.Driver.Agent(agent)
	if err != nil {
		return r.fail(http.StatusNotFound, "%v", err)
	}
	if !c.owns(agent) || a.Standby() {
		return r.fail(http.StatusServiceUnavailable, "replica %q does not run agent %q right now (it is changing owner); retry", c.o.Holder, agent)
	}
	if why := c.doubt(agent); why != "" {
		return r.fail(http.StatusServiceUnavailable, "owner of agent %q unknown right now: %s; retry", agent, why)
	}
	switch req.Verb {
	case VerbReset:
		r = c.reset(r, agent, req)
	case VerbRunSchedule:
		r = c.runSchedule(r, a, req.Schedule)
	case VerbView:
		r = c.view(r, agent)
	case VerbInbox:
		r = c.inbox(r, a)
	case VerbMessage:
		r = r.result(http.StatusOK, a.Message(req.MessageID))
	case VerbMemory, VerbMemoryCompact, VerbMemoryClear:
		r = memoryVerb(r, a, req)
	case VerbApprovals, VerbApprove, VerbDeny:
		r = approvalVerb(r, a, req)
	case VerbAsk:
		r = c.ask(ctx, r, a, req)
	case VerbModel:
		r = modelVerb(r, a, req)
	case VerbSteer:
		r = c.steerVerb(r, a, req)
	default:
		if hint := c.haltHint(agent, a, req.Verb); hint != "" {
			r = r.fail(http.StatusConflict, "%s", hint)
			break
		}
		r = apply(r, a, req)
	}
	r.OK = r.Code < 300
	if r.State == "" {
		r.State = string(a.State())
	}
	return r
}

func (r Reply) fail(code int, format string, args ...any) Reply {
	r.Code, r.Error, r.OK = code, fmt.Sprintf(format, args...), false
	return r
}

func (r Reply) result(code int, v any) Reply {
	data, err := json.Marshal(v)
	if err != nil {
		return r.fail(http.StatusInternalServerError, "encode result: %v", err)
	}
	r.Code, r.Result = code, data
	return r
}

// apply carries out the driver's own verbs.
func apply(r Reply, a *driver.Agent, req Request) Reply {
	r.Code = http.StatusOK
	by := req.Audit()
	switch req.Verb {
	case VerbPause:
		a.PauseAs(by)
	case VerbResume:
		dropped, err := a.ResumeAs(by, req.Message, req.DropQueued)
		if err != nil {
			r = r.fail(http.StatusConflict, "%v", err)
			break
		}
		if req.DropQueued {
			r.Dropped = &dropped
		}
	case VerbInterrupt:
		hold := req.Hold == nil || *req.Hold
		running := a.InterruptAs(by, hold)
		r.TurnRunning = &running
	case VerbWake:
		switch a.State() {
		case driver.Paused:
			r = r.fail(http.StatusConflict, "agent %q is paused: wake does not run a turn behind a pause; run `agent-worker resume %s` (POST /v1/agents/%s/resume), which runs one", a.Name(), a.Name(), a.Name())
		case driver.Stopped:
			r = r.fail(http.StatusConflict, "agent is stopped")
		default:
			a.WakeAs(by, req.Message)
		}
	default:
		r = r.fail(http.StatusBadRequest, "unknown verb %q (want %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s or %s)", req.Verb,
			VerbPause, VerbResume, VerbInterrupt, VerbWake, VerbReset, VerbRunSchedule, VerbView, VerbInbox, VerbMessage,
			VerbMemory, VerbMemoryCompact, VerbMemoryClear, VerbApprovals, VerbApprove, VerbDeny)
	}
	return r
}

// haltHint is why verb cannot take effect on a halted agent (resume and
// wake run no turn behind a guardrail's halt), with what to do instead;
// "" when it can.
func (c *Control) haltHint(agent string, a *driver.Agent, verb string) string {
	if (verb != VerbResume && verb != VerbWake) || a.State() != driver.Halted {
		return ""
	}
	guardrail, why := "GUARDRAIL", a.HaltReason()
	if c.o.Guard != nil {
		if st, ok := c.o.Guard.Status(agent); ok && st.Trip != nil {
			guardrail, why = st.Trip.Guardrail, st.Trip.Reason
		}
	}
	add := ""
	if guardrail == "turn_usd" || guardrail == "session_usd" || guardrail == "daily_usd" || guardrail == "worker_daily_usd" {
		add = " --add-budget USD"
	}
	return fmt.Sprintf("agent %q is halted by %s (%s): %s runs no turn until the guardrail is reset; run `agent-worker reset %s %s%s` (POST /v1/agents/%s/guardrails/reset), then %s",
		agent, guardrail, why, verb, agent, guardrail, add, agent, verb)
}

// reset lifts a guardrail on the owner, against the owner's ledger.
func (c *Control) reset(r Reply, agent string, req Request) Reply {
	g := c.o.Guard
	switch {
	case g == nil:
		return r.fail(http.StatusNotFound, "this worker has no guardrails")
	case req.Guardrail == "":
		return r.fail(http.StatusBadRequest, `"guardrail" is required: one of %s, %s, %s, %s, %s`, guard.Turn, guard.Session, guard.Daily, guard.WorkerDaily, guard.Watchdog)
	}
	if _, ok := g.Status(agent); !ok {
		return r.fail(http.StatusNotFound, "agent %q has no guardrails", agent)
	}
	res, err := g.ResetAs(agent, req.Guardrail, req.AddBudgetUSD, req.Audit())
	if refused, ok := errors.AsType[*guard.RefusedError](err); ok {
		r = r.result(http.StatusConflict, Refusal{Error: err.Error(), RefusedError: refused})
		r.Error = err.Error()
		return r
	}
	switch {
	case errors.Is(err, guard.ErrNotOwner), errors.Is(err, guard.ErrNotLoaded):
		return r.fail(http.StatusServiceUnavailable, "%v", err)
	case err != nil:
		// Unknown guardrail, a negative amount, budget for a guardrail
		// that takes none, or no ceiling configured: the request is wrong.
		return r.fail(http.StatusBadRequest, "%v", err)
	}
	return r.result(http.StatusOK, res)
}

// runSchedule fires a schedule on the owner, through the agent's gate.
func (c *Control) runSchedule(r Reply, a *driver.Agent, name string) Reply {
	if !slices.Contains(a.Schedules(), name) {
		return r.fail(http.StatusNotFound, "agent %q has no schedule %q", a.Name(), name)
	}
	if gate := a.Gate(); gate != "" {
		return r.fail(http.StatusConflict, "agent %q is %s: the schedule was not run", a.Name(), gate)
	}
	if err := c.o.Scheduler.RunNow(a.Name(), name); err != nil {
		// The gate may have closed since the check; otherwise the
		// schedule is configured but disabled.
		if gate := a.Gate(); gate != "" {
			return r.fail(http.StatusConflict, "agent %q is %s: the schedule was not run", a.Name(), gate)
		}
		return r.fail(http.StatusNotFound, "%v", err)
	}
	run := ScheduleRun{Queued: true, Agent: a.Name(), Schedule: name}
	if next := c.o.Scheduler.Next(a.Name(), name); !next.IsZero() {
		run.NextFire = &next
	}
	return r.result(http.StatusAccepted, run)
}

// view returns the owner's view of the agent.
func (c *Control) view(r Reply, agent string) Reply {
	if c.o.View == nil {
		return r.fail(http.StatusNotFound, "this replica serves no agent views")
	}
	v, err := c.o.View(agent)
	if err != nil {
		return r.fail(http.StatusInternalServerError, "view of agent %q: %v", agent, err)
	}
	r.Code, r.Result = http.StatusOK, v
	return r
}

// inbox lists the owner's queued messages.
func (c *Control) inbox(r Reply, a *driver.Agent) Reply {
	st := a.Status()
	return r.result(http.StatusOK, Inbox{Agent: a.Name(), Owner: c.o.Holder, Pending: st.InboxPending, Deferred: st.Deferred,
		Cap: st.InboxCap, Messages: a.Queued()})
}

// ServeNATS answers requests on every agent's control subject until the
// returned subscription is unsubscribed, for the agents this replica owns
// only: a request for any other agent gets no reply from here at all, so
// the requester gets its owner's (or, with no owner alive, none). Requests
// are JSON Requests; replies JSON Replies, also for errors (bad JSON).
// Each request is handled on its own goroutine, so a slow store behind one
// verb does not hold up the next.
func (c *Control) ServeNATS() (*nats.Subscription, error) {
	if c.o.Conn == nil {
		return nil, errors.New("control: ServeNATS needs Options.Conn")
	}
	nc, subjects := c.o.Conn, c.o.Subjects
	sub, err := nc.Subscribe(subjects.AllControl(), func(m *nats.Msg) {
		name, _, _ := subjects.Agent(m.Subject)
		if _, err := c.o.Driver.Agent(name); err != nil && c.o.Owner != nil {
			return // nobody owns an agent we do not know; stay silent
		}
		if !c.owns(name) || c.doubt(name) != "" {
			return // silent: the owner answers (one in doubt may be a former owner)
		}
		go c.serve(m, name)
	})
	if err != nil {
		return nil, err
	}
	// Once Start returns, requests must find a responder.
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	return sub, nil
}

// serve answers one request for an agent this replica owns: who asks
// first (401, package documentation), then the body (400), then whether
// the caller may (403); then the verb, on behalf of the caller's token
// name, or of the by a sealed forward names.
func (c *Control) serve(m *nats.Msg, name string) {
	var req Request
	var reply Reply
	who, refused := c.authenticate(m, name)
	if refused == nil {
		if err := json.Unmarshal(m.Data, &req); err != nil {
			refused = &refusal{http.StatusBadRequest, `body must be JSON like {"verb": "pause"}`}
		} else {
			req.By = who.who.Name // whatever by the body claims
			refused = who.authorise(name, req.Verb)
		}
	}
	if refused != nil {
		reply = Reply{Agent: name, Verb: req.Verb, Owner: c.o.Holder}.fail(refused.code, "%s", refused.why)
	} else {
		reply = c.Apply(name, req)
	}
	level := slog.LevelInfo
	switch {
	case refused != nil && refused.code != http.StatusBadRequest:
		level = slog.LevelWarn
	case req.Verb == VerbView || req.Verb == VerbInbox || req.Verb == VerbMessage:
		level = slog.LevelDebug
	}
	c.o.Log.Log(context.Background(), level, "control request", "agent", name, "verb", req.Verb, "by", req.By, "reason", req.Reason,
		"forwarded", who.forwarded, "ok", reply.OK, "code", reply.Code, "error", reply.Error)
	if m.Reply == "" {
		return
	}
	data, _ := json.Marshal(reply)
	if err := m.Respond(data); err != nil {
		c.o.Log.Warn("control reply failed", "agent", name, "error", err)
	}
}
