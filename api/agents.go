package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/agent-worker/agent-worker/approval"
	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/scheduler"
)

// MaxTurnText bounds the text of the last turn shown in a view, in runes.
const MaxTurnText = 500

// AgentView is one agent as GET /v1/agents/{name} shows it: the owner's
// view, whichever replica serves it.
type AgentView struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// Owner names the replica that owns the agent and built this view
	// (its lease.holder); ServedBy the replica that answered the request.
	// Every field but ServedBy is the same from every replica.
	Owner    string `json:"owner,omitempty"`
	ServedBy string `json:"served_by,omitempty"`
	// Error, in a list only, says why the agent's owner could not be
	// asked (state "unknown"): no replica owns it right now. GET
	// /v1/agents/{name} answers 503 instead.
	Error string `json:"error,omitempty"`
	// HaltReason says why a halted agent is halted.
	HaltReason string `json:"halt_reason,omitempty"`
	Paused     bool   `json:"paused"`
	// PausedSince, PausedBy and PauseReason say, while the agent is
	// paused, since when, by whom (the API token's name, "nats", ...) and
	// why (the operator's reason, if given). They are stored with the
	// pause, so they survive restarts and changes of owner.
	PausedSince *time.Time `json:"paused_since,omitempty"`
	PausedBy    string     `json:"paused_by,omitempty"`
	PauseReason string     `json:"pause_reason,omitempty"`
	// Standby: the replica that built the view does not run the agent.
	// Views are built by the owner, so it is false unless ownership was
	// changing at that moment.
	Standby bool `json:"standby,omitempty"`
	// NextWake is the earliest armed wake: the agent's timer or heartbeat,
	// or a schedule's next fire. NextWakeCause is "timer", "heartbeat" or
	// "schedule" (NextWakeSchedule then names it). A paused or halted
	// agent's wake still fires but runs no turn.
	NextWake         *time.Time `json:"next_wake,omitempty"`
	NextWakeCause    string     `json:"next_wake_cause,omitempty"`
	NextWakeSchedule string     `json:"next_wake_schedule,omitempty"`
	// NextWakeReason says why in words ("retry after failure", ...).
	NextWakeReason string `json:"next_wake_reason,omitempty"`
	// WaitingFor says why queued work waits (state "waiting"): a
	// dependency that is down. It runs by itself when it is back.
	WaitingFor string `json:"waiting_for,omitempty"`
	// LogWaiting counts the agent's messages its input log holds beyond
	// what its inbox has read (the inbox is at its cap, inbox_cap): they
	// come in later turns, oldest first, none dropped.
	LogWaiting int `json:"log_waiting,omitempty"`
	// FailedTurns counts failed turns in a row; their retries back off.
	FailedTurns int `json:"failed_turns,omitempty"`
	// ThrottledUntil is set while a turn limit holds the next turn back;
	// ThrottledBy names it (turns_per_hour, max_per_wake).
	ThrottledUntil *time.Time `json:"throttled_until,omitempty"`
	ThrottledBy    string     `json:"throttled_by,omitempty"`
	// TurnsPerHour is the agent's turn limit.
	TurnsPerHour int `json:"turns_per_hour,omitempty"`
	// InboxPending counts waiting wake messages, DeferredPending the
	// deferred ones.
	InboxPending    int    `json:"inbox_pending"`
	DeferredPending int    `json:"deferred_pending"`
	InboxCap        int    `json:"inbox_cap"`
	PendingWakes    int    `json:"pending_wakes"`
	Turns           uint64 `json:"turns"`
	// Model is the configured model's name; ModelSwitch says which model
	// is in force (an operator may have switched it: POST .../model),
	// with what reasoning effort, since when, by whom and why.
	Model       string            `json:"model"`
	ModelSwitch *driver.ModelView `json:"model_switch,omitempty"`
	// Guardrails is spend against each ceiling and the trip, if any; nil
	// when the server has no guard.
	Guardrails *guard.Status `json:"guardrails,omitempty"`
	// SubagentsRunning counts the agent's background subagents running
	// on its owner.
	SubagentsRunning int            `json:"subagents_running"`
	Schedules        []ScheduleView `json:"schedules"`
	LastTurn         *TurnView      `json:"last_turn,omitempty"`
	// PendingApprovals are the agent's tool calls waiting for an
	// operator's decision (POST .../approvals/{id}/approve or deny).
	PendingApprovals []approval.Request `json:"pending_approvals,omitempty"`
}

// ScheduleView is one configured schedule. NextFire is nil for a disabled
// schedule or before the scheduler has started.
type ScheduleView struct {
	Name     string     `json:"name"`
	NextFire *time.Time `json:"next_fire,omitempty"`
	// Skipped: the agent is paused or halted, so its next tick runs no
	// turn (it is counted as skipped) unless the gate opens first.
	Skipped bool `json:"skipped,omitempty"`
	// Timezone is the schedule's IANA zone ("" for UTC); NextFireLocal
	// is NextFire in it ("2026-11-30 08:00:00 CET").
	Timezone      string `json:"timezone,omitempty"`
	NextFireLocal string `json:"next_fire_local,omitempty"`
}

// TurnView is the last finished turn.
type TurnView struct {
	N               uint64    `json:"n"`
	Started         time.Time `json:"started"`
	Outcome         string    `json:"outcome"`
	Error           string    `json:"error,omitempty"`
	DurationSeconds float64   `json:"duration_seconds"`
	TokensIn        int       `json:"tokens_in"`
	TokensOut       int       `json:"tokens_out"`
	ModelCalls      int       `json:"model_calls"`
	ToolCalls       int       `json:"tool_calls"`
	Messages        int       `json:"messages"`
	// CostUSD is what the turn's model calls cost (the guard's turn spend;
	// 0 for an unpriced model). For a running agent it is the turn so far.
	CostUSD float64 `json:"cost_usd"`
	// Text is what the model said, cut to MaxTurnText runes.
	Text string `json:"text,omitempty"`
}

// StateUnknown is the state a list shows for an agent whose owner could
// not be asked.
const StateUnknown = "unknown"

// MarshalJSON writes the view; an unknown agent's (State StateUnknown:
// its owner could not be asked) has only what this replica's config knows
// — name, model, schedule names — with the state, the error and
// served_by: never counts or flags that would read as the owner's truth.
func (v AgentView) MarshalJSON() ([]byte, error) {
	if v.State != StateUnknown {
		type plain AgentView // without this method
		return json.Marshal(plain(v))
	}
	return json.Marshal(struct {
		Name      string         `json:"name"`
		State     string         `json:"state"`
		ServedBy  string         `json:"served_by,omitempty"`
		Error     string         `json:"error,omitempty"`
		Model     string         `json:"model"`
		Schedules []ScheduleView `json:"schedules"`
	}{v.Name, v.State, v.ServedBy, v.Error, v.Model, v.Schedules})
}

// SubagentCounter counts an agent's running background subagents;
// background.Manager is one.
type SubagentCounter interface {
	Running(agent string) int
}

// ViewOptions are what LocalView builds an agent's view from.
type ViewOptions struct {
	Driver *driver.Driver // required
	// Guard supplies spend and trips; nil: no guardrails in the view.
	Guard *guard.Guard
	// Scheduler supplies schedules' next fires; default
	// Driver.Scheduler().
	Scheduler *scheduler.Scheduler
	// Subagents counts running subagents; nil: 0.
	Subagents SubagentCounter
	// Holder names this replica: the view's owner, since only the owner
	// is asked for it.
	Holder string
}

// LocalView returns the view function control.Options.View takes: the
// agent's AgentView as this replica sees it, as JSON, naming this replica
// (Holder) as its owner. control calls it on the agent's owner only, which
// is what makes every replica show the owner's truth.
func LocalView(o ViewOptions) func(agent string) (json.RawMessage, error) {
	if o.Scheduler == nil && o.Driver != nil {
		o.Scheduler = o.Driver.Scheduler()
	}
	return func(name string) (json.RawMessage, error) {
		a, err := o.Driver.Agent(name)
		if err != nil {
			return nil, err
		}
		return json.Marshal(o.view(a))
	}
}

// view takes a snapshot of one agent.
func (o ViewOptions) view(a *driver.Agent) AgentView {
	st := a.Status()
	owner := o.Holder // the view is built on the owner: this replica
	if owner == "" {
		owner = st.Owner
	}
	v := AgentView{
		Name: st.Name, State: string(st.State), Owner: owner, HaltReason: st.HaltReason, Paused: st.Paused, Standby: st.Standby,
		NextWake: st.NextWake, NextWakeCause: st.NextWakeCause, NextWakeReason: st.NextWakeReason,
		WaitingFor: st.WaitingFor, FailedTurns: st.FailedTurns, ThrottledUntil: st.ThrottledUntil, ThrottledBy: st.ThrottledBy,
		TurnsPerHour: st.TurnsPerHour,
		InboxPending: st.InboxPending, DeferredPending: st.Deferred, InboxCap: st.InboxCap, LogWaiting: st.LogWaiting,
		PendingWakes: st.PendingWakes, Turns: st.Turns, Model: a.ModelName(),
		Schedules: []ScheduleView{},
	}
	if p, ok := a.PauseInfo(); ok {
		if !p.Since.IsZero() {
			v.PausedSince = &p.Since
		}
		v.PausedBy, v.PauseReason = p.By, p.Reason
	}
	if o.Guard != nil {
		if g, ok := o.Guard.Status(st.Name); ok {
			v.Guardrails = &g
		}
	}
	if o.Subagents != nil {
		v.SubagentsRunning = o.Subagents.Running(st.Name)
	}
	if mv, err := a.ModelView(); err == nil {
		v.ModelSwitch = &mv
	}
	v.PendingApprovals = a.PendingApprovals()
	for _, name := range a.Schedules() {
		sv := ScheduleView{Name: name, Timezone: o.Scheduler.Timezone(st.Name, name)}
		if next := o.Scheduler.Next(st.Name, name); !next.IsZero() {
			sv.NextFire = &next
			if loc, err := time.LoadLocation(sv.Timezone); err == nil && sv.Timezone != "" {
				sv.NextFireLocal = next.In(loc).Format("2006-01-02 15:04:05 MST")
			}
			if v.NextWake == nil || next.Before(*v.NextWake) {
				v.NextWake, v.NextWakeCause, v.NextWakeSchedule, v.NextWakeReason = &next, "schedule", name, "schedule "+name
			}
		}
		v.Schedules = append(v.Schedules, sv)
	}
	if gated := gateText(v); gated != "" {
		for i := range v.Schedules {
			v.Schedules[i].Skipped = v.Schedules[i].NextFire != nil
		}
		if v.NextWakeCause == "schedule" {
			v.NextWakeReason += " (skipped: the agent is " + gated + ")"
		}
	}
	if l := st.LastTurn; l != nil {
		v.LastTurn = &TurnView{
			N: l.N, Started: l.Started, Outcome: l.Outcome, Error: textclip.RunesWithin(l.Error, MaxTurnText, "…"),
			DurationSeconds: l.Duration.Seconds(), TokensIn: l.TokensIn, TokensOut: l.TokensOut,
			ModelCalls: l.ModelCalls, ToolCalls: l.ToolCalls, Messages: l.Messages,
			Text: textclip.RunesWithin(l.Text, MaxTurnText, "…"),
		}
		if v.Guardrails != nil {
			v.LastTurn.CostUSD = v.Guardrails.Turn.SpentUSD
		}
	}
	return v
}

// viewOf asks the agent's owner for its view (here, when this replica
// owns it). On failure it returns the HTTP status to answer with: 503
// when no owner answered, the owner's status otherwise.
func (s *Server) viewOf(ctx context.Context, name string) (AgentView, int, error) {
	reply, err := s.ctl.Do(ctx, name, control.Request{Verb: control.VerbView})
	if err != nil {
		return AgentView{}, http.StatusServiceUnavailable, err
	}
	if !reply.OK {
		return AgentView{}, reply.Status(), errors.New(reply.Error)
	}
	var v AgentView
	if err := json.Unmarshal(reply.Result, &v); err != nil {
		return AgentView{}, http.StatusBadGateway, fmt.Errorf("the view of agent %q from its owner %q is not an agent view: %w", name, reply.Owner, err)
	}
	v.ServedBy = s.o.Holder
	return v, http.StatusOK, nil
}

// views takes a snapshot of the agents who may see, each from its owner
// (asked in parallel). An agent whose owner cannot be asked is listed with
// state "unknown" and the reason in Error, never with this replica's
// standby state.
func (s *Server) views(ctx context.Context, who caller) []AgentView {
	var agents []*driver.Agent
	for _, a := range s.driver.Agents() {
		if who.MayAccess(a.Name()) {
			agents = append(agents, a)
		}
	}
	out := make([]AgentView, len(agents))
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Go(func() {
			v, _, err := s.viewOf(ctx, a.Name())
			if err != nil {
				v = AgentView{Name: a.Name(), State: StateUnknown, ServedBy: s.o.Holder, Error: err.Error(),
					Model: a.ModelName(), Schedules: []ScheduleView{}}
				for _, n := range a.Schedules() {
					v.Schedules = append(v.Schedules, ScheduleView{Name: n})
				}
			}
			out[i] = v
		})
	}
	wg.Wait()
	return out
}

// agent finds the route's agent. An agent outside the caller's agents is
// answered 403 — whether or not it exists, so a scoped token learns
// nothing about other agents — and an unknown one 404.
func (s *Server) agent(w http.ResponseWriter, r *http.Request) (*driver.Agent, bool) {
	name := r.PathValue("name")
	rec := record(r)
	rec.agent = name
	if !rec.who.MayAccess(name) {
		forbidAgent(w, r, rec.who, name)
		return nil, false
	}
	a, err := s.driver.Agent(name)
	if err != nil {
		fail(w, r, http.StatusNotFound, "unknown agent %q", name)
		return nil, false
	}
	return a, true
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Agents []AgentView `json:"agents"`
	}{s.views(r.Context(), record(r).who)})
}

// getAgent serves GET /v1/agents/{name}: the owner's view, 503 when no
// replica owns the agent right now.
func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) {
	a, ok := s.agent(w, r)
	if !ok {
		return
	}
	v, code, err := s.viewOf(r.Context(), a.Name())
	if err != nil {
		if code == http.StatusServiceUnavailable {
			noOwner(w, r, err)
			return
		}
		fail(w, r, code, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// gateText is "paused" or "halted" when the agent's gate is closed, else
// "".
func gateText(v AgentView) string {
	switch {
	case v.Paused:
		return "paused"
	case v.State == string(driver.Halted):
		return "halted"
	}
	return ""
}
