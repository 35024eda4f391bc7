package api

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agent-worker/agent-worker/approval"
	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/money"
	"github.com/agent-worker/agent-worker/turnlog"
)

//go:embed status.html
var pageSource string

func parsePage() (*template.Template, error) {
	return template.New("status").Parse(pageSource)
}

// pageData is what the status page renders.
type pageData struct {
	Generated string
	// ServedBy names the replica that rendered the page; every row is
	// its agent's owner's view.
	ServedBy string
	NotReady []string
	Agents   []pageRow
	// Viewer is who looks, and so which verbs and logout the page offers.
	Viewer pageViewer
}

// pageRow is one agent's row, formatted for reading.
type pageRow struct {
	Name  string
	State string
	// Owner names the replica that owns and runs the agent.
	Owner string
	// HaltReason says why a halted agent is halted, or why its state is
	// unknown (no owner answered).
	HaltReason string
	NextWake   string // "" when none
	WakeCause  string
	Inbox      int
	InboxCap   int
	Deferred   int
	Priced     bool
	Guarded    bool
	Bars       []spendBar
	Trip       string // guardrail trip reason, "" when none
	Last       *pageTurn

	// Approvals are the agent's tool calls waiting for an operator:
	// "restart_deployment {"name":"api"} (id …, expires in 42m)".
	Approvals []string

	// Pause says since when, by whom and why a paused agent is paused
	// ("paused since 10:00:00 UTC (3m0s ago) by ops: db migration"); ""
	// when it is not.
	Pause string
	// Model says which model a switched agent runs on, since when, by
	// whom and why (modelText); "" on its configured model.
	Model string

	// Recent are the agent's newest PageTurns turns from the turn log,
	// newest first; RecentError says why they could not be read.
	Recent      []pageRecent
	RecentError string
	// Memory is the agent's running memory as its owner shows it (GET
	// /v1/agents/{name}/memory), nil when it is off or the owner could
	// not be asked.
	Memory *pageMemory
}

// pageMemoryRunes bounds the memory's text on the page.
const pageMemoryRunes = 600

// pageMemory is an agent's running memory, formatted for reading.
type pageMemory struct {
	Text    string // "" before the first fold
	Tokens  int
	Through uint64 // the newest turn folded
	Updated string // "" never
}

// PageTurns is how many recent turns the status page shows per agent.
const PageTurns = 3

// pageTextRunes bounds a recent turn's text on the page.
const pageTextRunes = 200

// pageRecent is one recent turn, formatted for reading.
type pageRecent struct {
	N        uint64
	When     string
	Outcome  string
	Duration string
	Tokens   string
	Cost     string
	Wakes    string
	Messages string // ids, "" when none
	Tools    string // name (outcome), ...
	Text     string // the text, or the error of a failed turn
}

// spendBar is spend against one ceiling.
type spendBar struct {
	Label   string
	Spent   string
	Ceiling string
	Width   template.CSS // "width: 42.0%"
	Level   string       // ok, warn, over: the bar's colour
}

type pageTurn struct {
	When     string
	Outcome  string
	Duration string
	Tokens   string
	Text     string
}

// statusPage serves GET /: an HTML table of the agents the caller may see,
// each as its owner sees it and naming the owner, that refreshes itself
// every five seconds. No external assets; no script unless the caller may
// operate, and then only status.js, which sends the verbs (pageverbs.go).
func (s *Server) statusPage(w http.ResponseWriter, r *http.Request) {
	now := s.clock.Now()
	data := pageData{Generated: now.UTC().Format("2006-01-02 15:04:05 UTC"), ServedBy: s.o.Holder, NotReady: s.notReady(), Viewer: s.pageViewerOf(r)}
	for _, v := range s.views(r.Context(), record(r).who) {
		data.Agents = append(data.Agents, pageRowOf(v, now))
	}
	s.recentTurns(r.Context(), data.Agents, now)
	s.renderHTML(w, r, http.StatusOK, s.page, data, pageCSP, "status page")
}

// pauseText says since when, by whom and why a paused agent is paused, as
// the status page shows it.
func pauseText(v AgentView, now time.Time) string {
	return "paused" + sinceByWhy(v.PausedSince, v.PausedBy, v.PauseReason, now)
}

// sinceByWhy is an operator action's " since <when> by <who>: <why>", each
// part only when known.
func sinceByWhy(since *time.Time, by, reason string, now time.Time) string {
	var b strings.Builder
	if since != nil {
		b.WriteString(" since " + relTime(*since, now))
	}
	if by != "" {
		b.WriteString(" by " + by)
	}
	if reason != "" {
		b.WriteString(": " + reason)
	}
	return b.String()
}

func pageRowOf(v AgentView, now time.Time) pageRow {
	row := pageRow{
		Name: v.Name, State: v.State, Owner: v.Owner, HaltReason: v.HaltReason,
		Inbox: v.InboxPending, InboxCap: v.InboxCap, Deferred: v.DeferredPending,
	}
	if v.Error != "" {
		row.HaltReason = v.Error
	}
	if v.Paused {
		row.Pause = pauseText(v, now)
	}
	row.Model = modelText(v, now)
	for _, r := range v.PendingApprovals {
		row.Approvals = append(row.Approvals, fmt.Sprintf("%s (id %s, expires %s)", textclip.RunesWithin(approval.Describe(r), 120, "…"), r.ID, relTime(r.Expires, now)))
	}
	if v.NextWake != nil {
		row.NextWake = relTime(*v.NextWake, now)
		row.WakeCause = v.NextWakeCause
		if v.NextWakeSchedule != "" {
			row.WakeCause += " " + v.NextWakeSchedule
		}
	}
	if g := v.Guardrails; g != nil {
		row.Guarded, row.Priced = true, g.Priced
		for _, c := range []struct {
			label string
			c     guard.Ceiling
		}{{"turn", g.Turn}, {"session", g.Session}, {"day", g.Daily}, {"worker/day", g.WorkerDaily}} {
			if c.c.CeilingUSD > 0 {
				row.Bars = append(row.Bars, barOf(c.label, c.c))
			}
		}
		if g.Trip != nil {
			row.Trip = g.Trip.Guardrail + ": " + g.Trip.Reason
			if lift := pageLift(g, now); lift != "" {
				row.Trip += "; " + lift
			}
		}
	}
	if l := v.LastTurn; l != nil {
		row.Last = &pageTurn{
			When:     relTime(l.Started, now),
			Outcome:  l.Outcome,
			Duration: (time.Duration(l.DurationSeconds * float64(time.Second))).Round(time.Millisecond).String(),
			Tokens:   fmt.Sprintf("%d in / %d out", l.TokensIn, l.TokensOut),
			Text:     l.Text,
		}
		if l.Error != "" && l.Text == "" {
			row.Last.Text = l.Error
		}
	}
	return row
}

// recentTurns fills each row's recent turns from the turn log, a few
// agents at a time.
func (s *Server) recentTurns(ctx context.Context, rows []pageRow, now time.Time) {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range rows {
		row := &rows[i]
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if row.State != StateUnknown { // its owner answered the view: ask it again
				row.Memory = s.pageMemoryOf(ctx, row.Name, now)
			}
			turns, err := s.driver.TurnLog().Recent(ctx, row.Name, PageTurns)
			if err != nil {
				row.RecentError = err.Error()
				return
			}
			for _, t := range turns {
				row.Recent = append(row.Recent, pageRecentOf(t, now))
			}
		})
	}
	wg.Wait()
}

// pageMemoryOf asks the agent's owner for its memory, as GET
// /v1/agents/{name}/memory does; nil when the memory is off or the owner
// did not answer (the row's state already says why).
func (s *Server) pageMemoryOf(ctx context.Context, agent string, now time.Time) *pageMemory {
	reply, err := s.ctl.Do(ctx, agent, control.Request{Verb: control.VerbMemory})
	if err != nil || !reply.OK {
		return nil
	}
	var v driver.MemoryView
	if json.Unmarshal(reply.Result, &v) != nil || !v.Enabled {
		return nil
	}
	m := &pageMemory{Text: textclip.RunesWithin(v.Text, pageMemoryRunes, "…"), Tokens: v.Tokens, Through: v.Through}
	if !v.Updated.IsZero() {
		m.Updated = relTime(v.Updated, now)
	}
	return m
}

func pageRecentOf(t turnlog.Turn, now time.Time) pageRecent {
	p := pageRecent{
		N: t.N, When: relTime(t.Started, now), Outcome: t.Outcome,
		Duration: time.Duration(t.DurationSeconds * float64(time.Second)).Round(time.Millisecond).String(),
		Tokens:   fmt.Sprintf("%d in / %d out", t.TokensIn, t.TokensOut),
		Cost:     money.USD(t.CostUSD),
		Wakes:    strings.Join(t.Wakes, "; "),
		Text:     textclip.RunesWithin(t.Text, pageTextRunes, "…"),
	}
	if t.Text == "" {
		p.Text = textclip.RunesWithin(t.Error, pageTextRunes, "…")
	}
	var ids []string
	for _, m := range t.Messages {
		ids = append(ids, m.ID)
	}
	if more := t.MessageCount - len(ids); more > 0 {
		ids = append(ids, fmt.Sprintf("+%d more", more))
	}
	p.Messages = strings.Join(ids, ", ")
	var tools []string
	for _, c := range t.ToolCalls {
		tools = append(tools, c.Name+" ("+c.Outcome+")")
	}
	if more := t.ToolCallCount - len(tools); more > 0 {
		tools = append(tools, fmt.Sprintf("+%d more", more))
	}
	p.Tools = strings.Join(tools, ", ")
	return p
}

func barOf(label string, c guard.Ceiling) spendBar {
	ratio := c.SpentUSD / c.CeilingUSD
	pct := math.Max(0, math.Min(100, ratio*100))
	level := "ok"
	switch {
	case ratio >= 1:
		level = "over"
	case ratio >= 0.8:
		level = "warn"
	}
	return spendBar{
		Label: label, Spent: money.USD(c.SpentUSD), Ceiling: money.USD(c.CeilingUSD), Level: level,
		// The value is a number this function formats, never input, so
		// it is safe as CSS.
		Width: template.CSS(fmt.Sprintf("width: %.1f%%", pct)),
	}
}

// relTime renders t with how far it is from now: "08:15:00 UTC (in 4m)".
func relTime(t, now time.Time) string {
	d := t.Sub(now).Round(time.Second)
	abs := t.UTC().Format("2006-01-02 15:04:05 UTC")
	if t.UTC().Format(time.DateOnly) == now.UTC().Format(time.DateOnly) {
		abs = t.UTC().Format("15:04:05 UTC")
	}
	switch {
	case d > 0:
		return fmt.Sprintf("%s (in %s)", abs, d)
	case d < 0:
		return fmt.Sprintf("%s (%s ago)", abs, -d)
	}
	return abs + " (now)"
}
