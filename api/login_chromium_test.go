package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// TestStatusPageLoginInChromium logs in through the form in real headless
// Chromium with an operate token scoped to al*, sees only its agents,
// pauses one with its button — the driver agrees, the page shows it, the
// write log names the token — and logs out back to the form. The session
// cookie is HttpOnly (no script reads it) and SameSite=Strict, and holds
// no token.
func TestStatusPageLoginInChromium(t *testing.T) {
	t.Parallel()
	alps := alpha()
	alps.name = "alps"
	w := newWorld(t, api.Options{Tokens: withTokens(api.Token{Name: "alpha-ops", Role: api.RoleOperate, Value: alphaOpsToken, Agents: []string{"al*"}})},
		alpha(), alps, beta())
	ctx := startChromium(t, 30*time.Second)

	if err := chromedp.Do(ctx,
		chromedp.Navigate(w.ts.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), alphaOpsToken),
		chromedp.Click(chromedp.CSS(`form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-agent="alpha"]`)),
	); err != nil {
		t.Fatalf("log in through the form: %v", err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tbody tr[data-agent]")].map(r => r.dataset.agent).sort()`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rows, ",") != "alpha,alps" {
		t.Fatalf("the scoped session sees agents %v, want alpha and alps", rows)
	}
	if docCookie, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`)); err != nil || docCookie != "" {
		t.Fatalf("a script reads the session cookie: %q (%v)", docCookie, err)
	}
	if who, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`.session`))); err != nil || !strings.Contains(who, "signed in as alpha-ops (operate)") {
		t.Fatalf("the page says %q (%v)", who, err)
	}
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	var session *network.Cookie
	for _, c := range cookies.Cookies {
		if c.Name == api.SessionCookie {
			session = c
		}
	}
	if session == nil || !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict || session.Path != "/" ||
		strings.Contains(session.Value, alphaOpsToken) {
		t.Fatalf("session cookie in the browser: %+v", session)
	}

	// Pause alpha with its button; the page's script sends the CSRF token.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`tr[data-agent="alpha"] button[data-verb="pause"]`))); err != nil {
		t.Fatalf("click pause: %v", err)
	}
	wait.For(t, "alpha paused by the page", func() bool { return w.agent("alpha").Status().Paused })
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`tr[data-agent="alpha"][data-state="paused"] button[data-verb="resume"]`))); err != nil {
		t.Fatalf("the page does not show alpha paused: %v", err)
	}
	if w.agent("alps").Status().Paused || w.agent("beta").Status().Paused {
		t.Fatal("a click on alpha's pause paused another agent")
	}
	wait.For(t, "the write log naming the session's token", func() bool {
		return strings.Contains(w.logs.String(), `msg="api write" action=pause agent=alpha token=alpha-ops status=200`)
	})

	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`form.logout button`)),
		chromedp.WaitVisible(chromedp.ID("token")),
	); err != nil {
		t.Fatalf("log out: %v", err)
	}
}
