package wire

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/models/retry"
)

func TestBaseURLTakesOnlyHTTPAndHidesThePassword(t *testing.T) {
	for _, c := range []struct{ base, want, err string }{
		{"", "https://api.example.com/v1", ""},
		{"http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1", ""},
		{"ftp://files.example.com", "", `p: base URL "ftp://files.example.com" is not an http(s) URL`},
		{"https://user:hunter22@/v1", "", `p: base URL "https://user:xxxxx@/v1" is not an http(s) URL`},
		{"http://[::1", "", "p: base URL does not parse as a URL"},
	} {
		got, err := BaseURL("p", c.base, "https://api.example.com/v1")
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("BaseURL(%q) = %q, %v; want %q, %q", c.base, got, err, c.want, c.err)
		}
	}
}

func TestSendingDefaults(t *testing.T) {
	orig := &http.Client{Timeout: time.Second}
	hc := HTTPClient(orig)
	if hc == orig || orig.Transport != nil || hc.Transport == nil || hc.Timeout != time.Second {
		t.Fatalf("HTTPClient: copy %v, original transport %v, copy transport %v", hc != orig, orig.Transport, hc.Transport)
	}
	if got := Timeout(0, time.Minute); got != time.Minute {
		t.Errorf("Timeout(0) = %v", got)
	}
	if got := Timeout(time.Second, time.Minute); got != time.Second {
		t.Errorf("Timeout(1s) = %v", got)
	}
	got := HeaderSecrets([]string{"key"}, map[string]string{"X-Team": "pay", "X-Proxy-Key": "proxy-secret"})
	if strings.Join(got, ",") != "key,proxy-secret" {
		t.Errorf("HeaderSecrets = %v, want the key and the long header value", got)
	}
	var buf bytes.Buffer
	p := RetryPolicy(retry.Policy{}, slog.New(slog.NewTextHandler(&buf, nil)), "openai", "gpt")
	p.Log.Info("retrying")
	if !strings.Contains(buf.String(), "provider=openai model=gpt") {
		t.Errorf("retry log %q does not name the provider and model", buf.String())
	}
}
