package api

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"time"

	"github.com/agent-worker/agent-worker/guard"
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
// every five seconds. No script, no external assets.
func (s *Server) statusPage(w http.ResponseWriter, r *http.Request) {
	now := s.clock.Now()
	data := pageData{Generated: now.UTC().Format("2006-01-02 15:04:05 UTC"), ServedBy: s.o.Holder, NotReady: s.notReady()}
	for _, v := range s.views(r.Context(), record(r).who) {
		data.Agents = append(data.Agents, pageRowOf(v, now))
	}
	var buf bytes.Buffer
	if err := s.page.Execute(&buf, data); err != nil {
		s.log.Error("render status page", "error", err)
		fail(w, r, http.StatusInternalServerError, "render status page: %v", err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

func pageRowOf(v AgentView, now time.Time) pageRow {
	row := pageRow{
		Name: v.Name, State: v.State, Owner: v.Owner, HaltReason: v.HaltReason,
		Inbox: v.InboxPending, InboxCap: v.InboxCap, Deferred: v.DeferredPending,
	}
	if v.Error != "" {
		row.HaltReason = v.Error
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
		Label: label, Spent: usd(c.SpentUSD), Ceiling: usd(c.CeilingUSD), Level: level,
		// The value is a number this function formats, never input, so
		// it is safe as CSS.
		Width: template.CSS(fmt.Sprintf("width: %.1f%%", pct)),
	}
}

func usd(v float64) string {
	if v != 0 && math.Abs(v) < 0.01 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
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
