package alerting

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agent-worker/agent-worker/internal/textclip"
)

// timeline records what happened, from every side (the exporter, the
// notifications Alertmanager posted and the worker's answers, the worker's
// events, the model's prompts), stamped with the time since the test
// started. The test prints it at the end.
type timeline struct {
	start time.Time
	mu    sync.Mutex
	lines []line
}

type line struct {
	at   time.Duration
	seq  int
	text string
}

func newTimeline() *timeline { return &timeline{start: time.Now()} }

// add records text at time at (the moment it happened, which may be a
// little before it is recorded).
func (tl *timeline) add(at time.Time, format string, args ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.lines = append(tl.lines, line{at: at.Sub(tl.start), seq: len(tl.lines), text: fmt.Sprintf(format, args...)})
}

// now records text at the current time.
func (tl *timeline) now(format string, args ...any) { tl.add(time.Now(), format, args...) }

// since is the time since the test started.
func (tl *timeline) since() time.Duration { return time.Since(tl.start) }

// String renders the timeline in time order: "+12.345s  text".
func (tl *timeline) String() string {
	tl.mu.Lock()
	ls := slices.Clone(tl.lines)
	tl.mu.Unlock()
	slices.SortStableFunc(ls, func(a, b line) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq))
	})
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, "%+9.3fs  %s\n", l.at.Seconds(), strings.ReplaceAll(l.text, "\n", "\n            "))
	}
	return b.String()
}

// clip shortens s to n bytes for the timeline, on one line.
func clip(s string, n int) string {
	return textclip.Bytes(strings.Join(strings.Fields(s), " "), n, "…")
}
