package api_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/inbox"
)

// SetWebhooks swaps the table whole: a request to a webhook the swap
// removes, already in its handler, is answered 202 and counted as that
// webhook's; afterwards the removed webhook answers 404 (and is not
// counted: its name is the client's now), an added one is served, and a
// changed one renders its new template.
func TestSetWebhooksSwapsTheTableForNewRequestsOnly(t *testing.T) {
	t.Parallel()
	d, obs := &deliveries{}, &observer{}
	inDeliver, release := make(chan struct{}, 1), make(chan struct{})
	w := newWorld(t, api.Options{Observer: obs, Webhooks: map[string]api.Webhook{
		"ci":  {Agent: "alpha", Text: "ci {{.status}}"},
		"old": {Agent: "alpha", Text: "old {{.status}}"},
	}, Deliver: func(ctx context.Context, agent string, m inbox.Message) error {
		if m.Attributes["webhook"] == "old" {
			inDeliver <- struct{}{}
			<-release
		}
		return d.deliver(ctx, agent, m)
	}})

	answered := make(chan int, 1) // the status, or 0 when the request failed
	go func() {
		req, _ := http.NewRequest(http.MethodPost, w.ts.URL+"/v1/webhooks/old", strings.NewReader(`{"status": "red"}`))
		req.Header.Set("Authorization", "Bearer "+operateToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := w.ts.Client().Do(req)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	<-inDeliver
	if err := w.srv.SetWebhooks(map[string]api.Webhook{
		"ci":  {Agent: "alpha", Text: "CI now {{.status}}"},
		"new": {Agent: "beta", Text: "new {{.status}}", Deferred: true},
	}, nil); err != nil {
		t.Fatal(err)
	}
	close(release)
	if status := <-answered; status != http.StatusAccepted {
		t.Fatalf("the request in flight during the swap: HTTP %d", status)
	}
	if got := webhookOutcomes(obs); !slices.Equal(got, []string{"old accepted"}) {
		t.Fatalf("outcomes of the request in flight %q, want it counted as old's", got)
	}

	w.wantStatus(w.hook("old", operateToken, `{"status": "red"}`), http.StatusNotFound)
	w.wantStatus(w.hook("ci", operateToken, `{"status": "green"}`), http.StatusAccepted)
	w.wantStatus(w.hook("new", operateToken, `{"status": "blue"}`), http.StatusAccepted)
	if got := webhookOutcomes(obs); !slices.Equal(got, []string{"ci accepted", "new accepted"}) {
		t.Fatalf("outcomes after the swap %q", got)
	}
	var texts []string
	for _, m := range d.all() {
		texts = append(texts, m.Text+" "+string(m.Kind))
	}
	if want := []string{"old red inbox", "CI now green inbox", "new blue deferred"}; !slices.Equal(texts, want) {
		t.Fatalf("delivered %q, want %q", texts, want)
	}
}

// A table SetWebhooks cannot build (a webhook for an agent the driver
// lacks) is refused whole: the webhooks in force stay served.
func TestSetWebhooksRefusesABadTableWhole(t *testing.T) {
	t.Parallel()
	w, _, _ := webhookWorld(t, api.Options{})
	err := w.srv.SetWebhooks(map[string]api.Webhook{
		"ci2":   {Agent: "alpha", Text: "{{.x}}"},
		"ghost": {Agent: "nobody", Text: "{{.x}}"},
	}, nil)
	if err == nil || !strings.Contains(err.Error(), `webhook "ghost"`) {
		t.Fatalf("error %v", err)
	}
	w.wantStatus(w.hook("ci", operateToken, ciBuild), http.StatusAccepted)
	w.wantStatus(w.hook("ci2", operateToken, `{"x": 1}`), http.StatusNotFound)
}

// SetWebhooks' wake-on-resolved table takes effect for the Alertmanager
// receiver: an all-resolved notification is deferred for an agent not
// named, and wakes it once named.
func TestSetWebhooksChangesWhoWakesOnResolved(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	wantQueued(t, w.notify("alpha", notification(t, alert("a1", 0, true)), http.StatusAccepted), "deferred")
	if err := w.srv.SetWebhooks(nil, map[string]bool{"alpha": true}); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, w.notify("alpha", notification(t, alert("a2", 1, true)), http.StatusAccepted), "inbox")
}
