package api

import (
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/guard"
)

// MaxTurnText bounds the text of the last turn shown in a view, in runes.
const MaxTurnText = 500

// AgentView is one agent as GET /v1/agents/{name} shows it.
type AgentView struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// HaltReason says why a halted agent is halted.
	HaltReason string `json:"halt_reason,omitempty"`
	Paused     bool   `json:"paused"`
	// Standby: another replica holds the agent's lease and runs it; this
	// replica's view of it may be behind.
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
	Model           string `json:"model"`
	// Guardrails is spend against each ceiling and the trip, if any; nil
	// when the server has no guard.
	Guardrails *guard.Status `json:"guardrails,omitempty"`
	// SubagentsRunning is always 0 until subagents exist.
	SubagentsRunning int            `json:"subagents_running"`
	Schedules        []ScheduleView `json:"schedules"`
	LastTurn         *TurnView      `json:"last_turn,omitempty"`
}

// ScheduleView is one configured schedule. NextFire is nil for a disabled
// schedule or before the scheduler has started.
type ScheduleView struct {
	Name     string     `json:"name"`
	NextFire *time.Time `json:"next_fire,omitempty"`
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

// view takes a snapshot of one agent.
func (s *Server) view(a *driver.Agent) AgentView {
	st := a.Status()
	v := AgentView{
		Name: st.Name, State: string(st.State), HaltReason: st.HaltReason, Paused: st.Paused, Standby: st.Standby,
		NextWake: st.NextWake, NextWakeCause: st.NextWakeCause, NextWakeReason: st.NextWakeReason,
		WaitingFor: st.WaitingFor, FailedTurns: st.FailedTurns, ThrottledUntil: st.ThrottledUntil, ThrottledBy: st.ThrottledBy,
		TurnsPerHour: st.TurnsPerHour,
		InboxPending: st.InboxPending, DeferredPending: st.Deferred, InboxCap: st.InboxCap,
		PendingWakes: st.PendingWakes, Turns: st.Turns, Model: a.ModelName(),
		Schedules: []ScheduleView{},
	}
	if s.guard != nil {
		if g, ok := s.guard.Status(st.Name); ok {
			v.Guardrails = &g
		}
	}
	for _, name := range a.Schedules() {
		sv := ScheduleView{Name: name}
		if next := s.sched.Next(st.Name, name); !next.IsZero() {
			sv.NextFire = &next
			if v.NextWake == nil || next.Before(*v.NextWake) {
				v.NextWake, v.NextWakeCause, v.NextWakeSchedule, v.NextWakeReason = &next, "schedule", name, "schedule "+name
			}
		}
		v.Schedules = append(v.Schedules, sv)
	}
	if l := st.LastTurn; l != nil {
		v.LastTurn = &TurnView{
			N: l.N, Started: l.Started, Outcome: l.Outcome, Error: cutRunes(l.Error, MaxTurnText),
			DurationSeconds: l.Duration.Seconds(), TokensIn: l.TokensIn, TokensOut: l.TokensOut,
			ModelCalls: l.ModelCalls, ToolCalls: l.ToolCalls, Messages: l.Messages,
			Text: cutRunes(l.Text, MaxTurnText),
		}
		if v.Guardrails != nil {
			v.LastTurn.CostUSD = v.Guardrails.Turn.SpentUSD
		}
	}
	return v
}

// views takes a snapshot of the agents who may see.
func (s *Server) views(who caller) []AgentView {
	agents := s.driver.Agents()
	out := make([]AgentView, 0, len(agents))
	for _, a := range agents {
		if who.mayAccess(a.Name()) {
			out = append(out, s.view(a))
		}
	}
	return out
}

// agent finds the route's agent. An agent outside the caller's agents is
// answered 403 — whether or not it exists, so a scoped token learns
// nothing about other agents — and an unknown one 404.
func (s *Server) agent(w http.ResponseWriter, r *http.Request) (*driver.Agent, bool) {
	name := r.PathValue("name")
	rec := record(r)
	rec.agent = name
	if !rec.who.mayAccess(name) {
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
	}{s.views(record(r).who)})
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) {
	a, ok := s.agent(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.view(a))
}

// cutRunes cuts s to at most n runes, the last of them "…" when anything
// was cut.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for i = range s {
		if count == n-1 {
			break
		}
		count++
	}
	return s[:i] + "…"
}
