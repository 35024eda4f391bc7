package alerting

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/internal/wait"
)

// tap stands between Alertmanager and the worker's receiver: it forwards
// every request unchanged (path, headers, body) to the worker and its
// answer unchanged back, and records both: what Alertmanager sent and what
// the worker said. Alertmanager's webhook URL points at it with the
// receiver's own path, /v1/alertmanager/{agent}.
type tap struct {
	upstream string
	srv      *httptest.Server
	tl       *timeline
	client   *http.Client

	mu    sync.Mutex
	notes []notification
}

// notification is one webhook request and the worker's answer.
type notification struct {
	N         int // 1-based, in arrival order
	At        time.Time
	Via       string // "alertmanager" or "test" (posted directly)
	Status    string // the payload's status: firing or resolved
	Alerts    int
	Firing    int
	Resolved  int
	Names     []string // alertnames, sorted, unique
	StartsAt  []string // startsAt of the alerts, sorted, unique
	Truncated int      // the payload's truncatedAlerts
	Body      []byte
	Code      int
	Answer    string
	Outcome   string // accepted, duplicate, rejected (4xx) or failed (5xx, no answer)
	Reply     answer
}

// amPayload is the part of Alertmanager's webhook payload the test reads.
type amPayload struct {
	Status          string `json:"status"`
	TruncatedAlerts int    `json:"truncatedAlerts"`
	Alerts          []struct {
		Status   string            `json:"status"`
		Labels   map[string]string `json:"labels"`
		StartsAt string            `json:"startsAt"`
	} `json:"alerts"`
}

// answer is the receiver's JSON answer, in the fields the test reads:
// {"status": "duplicate"} (or the older {"duplicate": true}) for a
// repeat, with reason; kind for what was queued and truncated for how
// many alerts it left out; error for a refusal.
type answer struct {
	Status    string `json:"status"`
	Duplicate bool   `json:"duplicate"`
	ID        string `json:"id"`
	Kind      string `json:"kind"`
	Reason    string `json:"reason"`
	Truncated int    `json:"truncated"`
	Error     string `json:"error"`
}

// String is the answer as the timeline shows it.
func (a answer) String() string {
	switch {
	case a.Error != "":
		return "error: " + a.Error
	case a.Status == "duplicate" || a.Duplicate:
		return fmt.Sprintf("status duplicate, reason %s, id %s", or(a.Reason, "-"), a.ID)
	}
	s := fmt.Sprintf("status %s, kind %s, id %s", or(a.Status, "-"), or(a.Kind, "-"), a.ID)
	if a.Truncated > 0 {
		s += fmt.Sprintf(", truncated %d", a.Truncated)
	}
	return s
}

func or(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

func newTap(t *testing.T, upstream string, tl *timeline) *tap {
	tp := &tap{upstream: upstream, tl: tl, client: &http.Client{Timeout: 30 * time.Second}}
	tp.srv = httptest.NewServer(http.HandlerFunc(tp.serve))
	t.Cleanup(tp.srv.Close)
	return tp
}

// URL is the tap's base URL, in place of the worker's.
func (tp *tap) URL() string { return tp.srv.URL }

func (tp *tap) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, tp.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := tp.client.Do(req)
	if err != nil {
		tp.tl.add(at, "alertmanager → worker: %s: no answer: %v", r.URL.Path, err)
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	ans, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	tp.record(at, "alertmanager", body, resp.StatusCode, ans)
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(ans)
}

// post sends body to the receiver directly, as Alertmanager would, and
// records it like a tapped notification.
func (tp *tap) post(t *testing.T, path, token string, body []byte) notification {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, tp.upstream+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	at := time.Now()
	resp, err := tp.client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	ans, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return tp.record(at, "test", body, resp.StatusCode, ans)
}

func (tp *tap) record(at time.Time, via string, body []byte, code int, ans []byte) notification {
	n := notification{At: at, Via: via, Body: body, Code: code, Answer: strings.TrimSpace(string(ans))}
	var p amPayload
	if err := json.Unmarshal(body, &p); err == nil {
		n.Status, n.Alerts, n.Truncated = p.Status, len(p.Alerts), p.TruncatedAlerts
		for _, a := range p.Alerts {
			if strings.EqualFold(a.Status, "resolved") {
				n.Resolved++
			} else {
				n.Firing++
			}
			if !slices.Contains(n.Names, a.Labels["alertname"]) {
				n.Names = append(n.Names, a.Labels["alertname"])
			}
			if !slices.Contains(n.StartsAt, a.StartsAt) {
				n.StartsAt = append(n.StartsAt, a.StartsAt)
			}
		}
		slices.Sort(n.Names)
		slices.Sort(n.StartsAt)
	}
	_ = json.Unmarshal(ans, &n.Reply)
	switch {
	case code == http.StatusOK && (n.Reply.Status == "duplicate" || n.Reply.Duplicate):
		n.Outcome = "duplicate"
	case code == http.StatusAccepted:
		n.Outcome = "accepted"
	case code >= 400 && code < 500:
		n.Outcome = "rejected"
	default:
		n.Outcome = "failed"
	}
	tp.mu.Lock()
	n.N = len(tp.notes) + 1
	tp.notes = append(tp.notes, n)
	tp.mu.Unlock()
	tp.tl.add(at, "%s → worker: notification #%d %s\n  → %d %s (%s)", via, n.N, n.describe(), code, n.Outcome, clip(n.Reply.String(), 110))
	return n
}

// describe summarises what a notification carried.
func (n notification) describe() string {
	s := fmt.Sprintf("[%s] %s: %d alert(s)", n.Status, strings.Join(n.Names, ","), n.Alerts)
	if n.Firing > 0 && n.Resolved > 0 {
		s += fmt.Sprintf(" (%d firing, %d resolved)", n.Firing, n.Resolved)
	}
	if len(n.StartsAt) == 1 {
		s += ", startsAt " + n.StartsAt[0]
	}
	if n.Truncated > 0 {
		s += fmt.Sprintf(", %d truncated by Alertmanager", n.Truncated)
	}
	return s + fmt.Sprintf(", %s", kib(len(n.Body)))
}

func kib(n int) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/1024)
}

// count is how many requests were recorded so far.
func (tp *tap) count() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.notes)
}

// all returns the recorded requests.
func (tp *tap) all() []notification {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return slices.Clone(tp.notes)
}

// next waits for the first notification from Alertmanager after the first
// `after` recorded requests that match, and returns it.
func (tp *tap) next(t *testing.T, after int, what string, match func(notification) bool) notification {
	t.Helper()
	var found *notification
	wait.Within(t, stepDeadline, what, func() bool {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		for i := after; i < len(tp.notes); i++ {
			if n := tp.notes[i]; n.Via == "alertmanager" && match(n) {
				found = &n
				return true
			}
		}
		return false
	})
	return *found
}

// about matches notifications of one alertname in one status.
func about(name, status string) func(notification) bool {
	return func(n notification) bool {
		return n.Status == status && slices.Equal(n.Names, []string{name})
	}
}
