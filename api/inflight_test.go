package api_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/metrics"
)

// distinctNotification is a notification of n big alerts whose content
// is its own (the first alert's fingerprint is tag), so concurrent ones
// are not duplicates of each other.
func distinctNotification(t *testing.T, n int, tag string) string {
	t.Helper()
	alerts := bigAlerts(n)
	alerts[0].Fingerprint = tag
	return notification(t, alerts...)
}

// heldDelivery is an Options.Deliver that reports each message on
// arrived and then holds it until release is closed: a request held there
// has read its body and is provably in flight.
type heldDelivery struct {
	arrived chan string
	release chan struct{}
	once    sync.Once
}

func newHeldDelivery() *heldDelivery {
	return &heldDelivery{arrived: make(chan string, 100), release: make(chan struct{})}
}

// free releases the held requests and every later one.
func (h *heldDelivery) free() { h.once.Do(func() { close(h.release) }) }

func (h *heldDelivery) deliver(ctx context.Context, _ string, m inbox.Message) error {
	h.arrived <- m.ID
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// await waits until n requests are held.
func (h *heldDelivery) await(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(deadline)
	for range n {
		select {
		case <-h.arrived:
		case <-timeout:
			t.Fatalf("fewer than %d requests reached delivery", n)
		}
	}
}

// scrape returns the value of one series of the world's /metrics.
func (w *world) scrape(series string) string {
	w.t.Helper()
	r := w.call(http.MethodGet, "/metrics", "", "", "")
	w.wantStatus(r, http.StatusOK)
	sc := bufio.NewScanner(strings.NewReader(string(r.body)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return v
		}
	}
	w.t.Fatalf("no series %s in /metrics", series)
	return ""
}

// Requests whose bodies together exceed api.max_inflight_bytes are not
// all admitted: while two notifications are in flight, a third that
// would pass the cap is answered 503 with Retry-After and a JSON error,
// counted in agent_worker_http_requests_total{code="503"} and logged;
// once the two finish, their bytes are free again. Each reserves its
// Content-Length, not the route's limit: two fit under a cap that holds
// fewer than two maximal payloads.
func TestInflightBytesOverTheCapAre503(t *testing.T) {
	t.Parallel()
	held := newHeldDelivery()
	defer held.free() // before the world's cleanup waits for its requests
	m := metrics.New([]metrics.AgentInfo{{Name: "alpha"}, {Name: "beta"}}, nil)
	var payloads []string
	for i := range 4 {
		payloads = append(payloads, distinctNotification(t, 60, fmt.Sprintf("tag-%d", i)))
	}
	size := int64(len(payloads[0]))
	w := newWorld(t, api.Options{
		Deliver:              held.deliver,
		Observer:             m,
		Metrics:              m.Handler(),
		AlertmanagerMaxBytes: 2 * size,
		MaxInflightBytes:     2*size + size/2,
	})
	m.SetHTTPRoutes(w.srv.Routes())

	var wg sync.WaitGroup
	first := make([]reply, 2)
	for i := range 2 {
		wg.Go(func() { first[i], _ = w.send("/v1/alertmanager/alpha", operateToken, strings.NewReader(payloads[i])) })
	}
	held.await(t, 2)

	third := make(chan reply, 1)
	go func() {
		r, _ := w.send("/v1/alertmanager/alpha", operateToken, strings.NewReader(payloads[2]))
		third <- r
	}()
	var r reply
	select {
	case r = <-third:
	case <-held.arrived:
		t.Fatalf("a third notification was admitted with %d bytes in flight, over the cap of %d", 3*size, 2*size+size/2)
	case <-time.After(deadline):
		t.Fatal("no answer to the third notification")
	}
	w.wantStatus(r, http.StatusServiceUnavailable)
	if r.header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	if msg := r.errorText(t); !strings.Contains(msg, "api.max_inflight_bytes") || !strings.Contains(msg, fmt.Sprint(2*size+size/2)) {
		t.Errorf("503 says %q; want it to name api.max_inflight_bytes and its value", msg)
	}
	const series = `agent_worker_http_requests_total{code="503",route="POST /v1/alertmanager/{name}"}`
	if got := w.scrape(series); got != "1" {
		t.Errorf("%s = %s, want 1", series, got)
	}
	if logs := w.logs.String(); !strings.Contains(logs, "status=503") || !strings.Contains(logs, "api.max_inflight_bytes") {
		t.Errorf("the refusal is not logged:\n%s", logs)
	}

	held.free()
	wg.Wait()
	for i, r := range first {
		if r.status != http.StatusAccepted {
			t.Errorf("held notification %d: status %d: %s", i, r.status, r.body)
		}
	}
	w.wantStatus(w.post("/v1/alertmanager/alpha", payloads[3]), http.StatusAccepted)
	w.wantStatus(w.post("/v1/alertmanager/alpha", payloads[2]), http.StatusAccepted) // the refused one, retried
	if got := w.scrape(series); got != "1" {
		t.Errorf("%s = %s after the release, want 1", series, got)
	}
}

// chunked is a body without a Content-Length: the client sends it
// chunked.
func chunked(s string) io.Reader { return io.MultiReader(strings.NewReader(s)) }

// send posts a JSON body to path with token ("" for none). Unlike call it
// may run on any goroutine: it reports a failed request instead of
// failing the test.
func (w *world) send(path, token string, body io.Reader) (reply, error) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.ts.URL+path, body)
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := w.ts.Client().Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: data}, err
}

// A request without a Content-Length reserves its route's whole limit
// while its body arrives, and frees it when it ends: with a cap of one
// maximal Alertmanager payload and a little more, a slow chunked
// notification leaves no room for a 60 KiB message until it is done.
func TestInflightChunkedBodyHoldsItsRoutesLimit(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	w := newWorld(t, api.Options{AlertmanagerMaxBytes: limit, MaxInflightBytes: limit + 32<<10})
	probe := `"` + strings.Repeat("x", 60<<10) + `"` // a JSON string, not an object: 400 when admitted
	probeStatus := func() int {
		return w.call(http.MethodPost, "/v1/agents/alpha/messages", operateToken, "application/json", probe).status
	}
	w.wantStatus(reply{status: probeStatus()}, http.StatusBadRequest)

	// The server reads a body only after it reserved its bytes: the
	// first read of the slow body says the reservation is held. (Probing
	// until a 503 instead would race: a probe in flight as the slow
	// notification reserves leaves it no room.)
	reading := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		r.Body = &firstRead{ReadCloser: r.Body, first: reading}
		w.srv.Handler().ServeHTTP(rw, r)
	}))
	t.Cleanup(slow.Close)
	payload := distinctNotification(t, 60, "slow")
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		req, err := http.NewRequest(http.MethodPost, slow.URL+"/v1/alertmanager/alpha", pr)
		if err != nil {
			t.Error(err)
			done <- 0
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+operateToken)
		resp, err := slow.Client().Do(req)
		if err != nil {
			t.Errorf("slow notification: %v", err)
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	if _, err := io.WriteString(pw, payload[:len(payload)/2]); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reading:
	case <-time.After(deadline):
		t.Fatal("the slow notification's body was never read")
	}
	if got := probeStatus(); got != http.StatusServiceUnavailable {
		t.Fatalf("a 60 KiB message while the slow notification holds its route's limit: %d, want 503", got)
	}
	if _, err := io.WriteString(pw, payload[len(payload)/2:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if code := <-done; code != http.StatusAccepted {
		t.Fatalf("slow notification: status %d", code)
	}
	w.wantStatus(reply{status: probeStatus()}, http.StatusBadRequest)
}

// switchableDelivery is an Options.Deliver that queues, fails or aborts
// the handler (panics with http.ErrAbortHandler), as set.
type switchableDelivery struct {
	mu   sync.Mutex
	mode string // "", "fail" or "abort"
}

func (d *switchableDelivery) set(mode string) { d.mu.Lock(); d.mode = mode; d.mu.Unlock() }

func (d *switchableDelivery) deliver(context.Context, string, inbox.Message) error {
	d.mu.Lock()
	mode := d.mode
	d.mu.Unlock()
	switch mode {
	case "fail":
		return errors.New("nats: no responders available for request")
	case "abort":
		panic(http.ErrAbortHandler)
	}
	return nil
}

// Whatever way a request ends — refused before its body is read (401),
// too large (413), bad (400), failing to queue (503) or its handler
// panicking — its reservation is freed: with a cap of exactly one maximal
// payload, a chunked notification (which reserves all of it) is admitted
// after each.
func TestInflightReservationIsFreedOnEveryPath(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	d := &switchableDelivery{}
	w := newWorld(t, api.Options{AlertmanagerMaxBytes: limit, MaxInflightBytes: limit, Deliver: d.deliver})
	good := func(tag string) string { return distinctNotification(t, 10, tag) }
	admitted := func(after string, i int) {
		t.Helper()
		r, err := w.send("/v1/alertmanager/alpha", operateToken, chunked(good(fmt.Sprint("probe-", i))))
		if err != nil || r.status != http.StatusAccepted {
			t.Fatalf("after %s, a chunked notification got %d (%v) %s, want 202: the reservation was not freed", after, r.status, err, r.body)
		}
	}
	for i, c := range []struct {
		name, token, mode, body string
		want                    int
	}{
		{name: "401 without a token", body: good("a"), want: http.StatusUnauthorized},
		{name: "413 over the limit", token: operateToken, body: `{"x":"` + strings.Repeat("x", limit) + `"}`, want: http.StatusRequestEntityTooLarge},
		{name: "400 not a notification", token: operateToken, body: `{"text": "no"}`, want: http.StatusBadRequest},
		{name: "503 delivery failed", token: operateToken, mode: "fail", body: good("b"), want: http.StatusServiceUnavailable},
		{name: "a panicking handler", token: operateToken, mode: "abort", body: good("c"), want: 0},
	} {
		d.set(c.mode)
		r, err := w.send("/v1/alertmanager/alpha", c.token, chunked(c.body))
		if r.status != c.want || (c.want == 0) != (err != nil) {
			t.Fatalf("%s: status %d (%v), want %d", c.name, r.status, err, c.want)
		}
		d.set("")
		admitted(c.name, i)
	}
}

// New refuses a cap below the largest single body limit: no request of
// that size could ever be admitted.
func TestNewRefusesACapBelowABodyLimit(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	for _, o := range []api.Options{
		{AlertmanagerMaxBytes: 1 << 20, MaxInflightBytes: 1<<20 - 1},
		{MaxBody: 1 << 20, AlertmanagerMaxBytes: 1 << 10, MaxInflightBytes: 1 << 19},
	} {
		o.Driver = w.driver
		_, err := api.New(o)
		if err == nil || !strings.Contains(err.Error(), "api.max_inflight_bytes") {
			t.Errorf("New(MaxInflightBytes %d, MaxBody %d, AlertmanagerMaxBytes %d) = %v, want an error naming api.max_inflight_bytes",
				o.MaxInflightBytes, o.MaxBody, o.AlertmanagerMaxBytes, err)
		}
	}
}

// firstRead closes first at its first Read.
type firstRead struct {
	io.ReadCloser
	first chan struct{}
	once  sync.Once
}

func (f *firstRead) Read(p []byte) (int, error) {
	f.once.Do(func() { close(f.first) })
	return f.ReadCloser.Read(p)
}
