package api_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/models/scripted"
)

func TestStatusPageHTML(t *testing.T) {
	t.Parallel()
	a := alpha()
	a.script = []config.ScriptStep{scripted.Text(`<script>alert("x")</script> all quiet`, 1200, 80)}
	w := newWorld(t, api.Options{}, a, beta())
	w.wantStatus(w.post("/v1/agents/beta/messages", `{"text": "spend a dollar"}`), http.StatusAccepted)
	wait.For(t, "beta halted", func() bool { return w.agent("beta").State() == driver.Halted })
	w.wantStatus(w.post("/v1/agents/alpha/messages", `{"text": "hello"}`), http.StatusAccepted)
	w.waitEvent("alpha", "turn-completed")
	w.waitTurnDone("alpha")

	r := w.get("/")
	w.wantStatus(r, http.StatusOK)
	page := string(r.body)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("Content-Type %q", ct)
	}
	for _, want := range []string{
		`<meta http-equiv="refresh" content="5">`,
		`data-agent="alpha" data-state="sleeping"`,
		`data-agent="beta" data-state="halted"`,
		`style="width: 100.0%"`, // beta's session bar: $1 of $1
		`style="width: 0.0%"`,   // alpha's: unpriced, $0 of $100
		`$1 of $1`,
		`session_usd: `, // beta's trip reason
		`class="outcome-completed">completed`,
		`1200 in / 80 out`,
		`&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; all quiet`,
		`nightly`, // alpha's next wake is its schedule
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "ZgotmplZ") {
		t.Fatal("the template refused a value (ZgotmplZ)")
	}
	if regexp.MustCompile(`<script|src="http|href="http`).MatchString(page) {
		t.Fatalf("the page runs scripts or loads external assets:\n%s", page)
	}
}

// TestStatusPageInChromium opens the page in real headless Chromium and
// reads the agents' rows from the DOM.
func TestStatusPageInChromium(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	w.wantStatus(w.post("/v1/agents/beta/pause", ""), http.StatusOK)

	tctx := startChromium(t, 15*time.Second)
	if _, err := chromedp.Call(tctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{"Authorization": "Bearer " + readToken},
	}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(tctx, chromedp.Navigate(w.ts.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-agent="beta"]`))); err != nil {
		t.Fatalf("load the status page: %v", err)
	}
	rows, err := chromedp.Run(tctx, chromedp.Nodes(chromedp.CSSAll(`tbody tr[data-agent]`)))
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, n := range rows {
		states[n.AttributeValue("data-agent")] = n.AttributeValue("data-state")
	}
	if len(states) != 2 || states["alpha"] != "sleeping" || states["beta"] != "paused" {
		t.Fatalf("rows in the DOM: %v", states)
	}
	badge, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS(`tr[data-agent="beta"] .badge`)))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(badge) != "paused" {
		t.Fatalf("beta's badge reads %q", badge)
	}
	title, err := chromedp.Run(tctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	if title != "agent-worker status" {
		t.Fatalf("title %q", title)
	}
}
