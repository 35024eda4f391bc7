package api_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// chromiumPath is where Debian's chromium package installs the browser;
// CI installs it.
const chromiumPath = "/usr/bin/chromium"

// startChromium starts real headless Chromium with a fresh profile and
// returns a context of its first tab, bounded by timeout once started;
// the browser is closed, and waited for, when the test ends. It fails,
// never skips, when Chromium is missing.
func startChromium(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("%s is missing (%v): install Debian's chromium package (apt-get install chromium); this test does not skip", chromiumPath, err)
	}
	// Not t.TempDir: Chromium's helper processes may still write to the
	// profile for a moment after the browser exits, and a failed removal
	// must not fail the test.
	profile, err := os.MkdirTemp("", "api-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeEventually(profile) })
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx) // close the browser and wait for it
		cancel()
		cancelAlloc()
	})
	// The first Run starts the browser and must not carry the timeout.
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	tctx, cancelT := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancelT)
	return tctx
}

// removeEventually removes dir, retrying while processes that are exiting
// still write to it; it gives up quietly after a few seconds.
func removeEventually(dir string) {
	end := time.Now().Add(5 * time.Second)
	for os.RemoveAll(dir) != nil && time.Now().Before(end) {
		<-time.After(50 * time.Millisecond)
	}
}
