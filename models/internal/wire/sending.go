package wire

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/agent-worker/agent-worker/models/retry"
)

// BaseURL returns base, or def when base is empty, once it is an http(s)
// URL with a host. The error names the provider and shows the URL without
// its password; a URL that does not parse is not shown at all.
func BaseURL(provider, base, def string) (string, error) {
	if base == "" {
		base = def
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("%s: base URL does not parse as a URL", provider)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s: base URL %q is not an http(s) URL", provider, u.Redacted())
	}
	return base, nil
}

// HTTPClient returns a copy of c (a client with Go's default transport
// when nil) whose transport goes through the retry package's
// (retry.Transport). c itself is never modified.
func HTTPClient(c *http.Client) *http.Client {
	hc := &http.Client{}
	if c != nil {
		cp := *c
		hc = &cp
	}
	hc.Transport = retry.Transport(hc.Transport)
	return hc
}

// Timeout returns the per-attempt timeout: t, or def when t is not
// positive.
func Timeout(t, def time.Duration) time.Duration {
	if t <= 0 {
		return def
	}
	return t
}

// RetryPolicy returns p logging to log when it has no logger of its own,
// every line naming the provider and the model.
func RetryPolicy(p retry.Policy, log *slog.Logger, provider, model string) retry.Policy {
	if p.Log == nil && log != nil {
		p.Log = log
	}
	if p.Log != nil {
		p.Log = p.Log.With("provider", provider, "model", model)
	}
	return p
}

// HeaderSecrets returns secrets with the values of headers long enough to
// be credentials (8 bytes or more) added: a header the config adds may be
// a proxy's key, and no error may show it.
func HeaderSecrets(secrets []string, headers map[string]string) []string {
	for _, v := range headers {
		if len(v) >= 8 {
			secrets = append(secrets, v)
		}
	}
	return secrets
}
