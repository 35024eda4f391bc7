package retry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agent-worker/agent-worker/internal/textclip"
)

// maxErrorBody is how much of an error response's body a Response keeps.
const maxErrorBody = 8 << 10

// Response is what Transport saw of the last HTTP response of an attempt.
type Response struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Header holds the response headers.
	Header http.Header
	// Body holds the first 8 KiB of the body when StatusCode >= 400.
	Body []byte
	// At is when the response headers arrived, for Retry-After dates.
	At time.Time
}

// Error returns the *StatusError for r, named after provider: the message
// and type come from the body's "error" object (the shape OpenAI, Anthropic
// and Gemini share: {"error": {"message", "type" or "status"}}), from
// {"error": "text"} (Ollama, many proxies), from {"message": ...}, or from
// the body's text; Retry-After comes from the headers. Each secret is
// replaced by "[redacted]" in the message.
func (r Response) Error(provider string, secrets ...string) *StatusError {
	typ, msg := errorMessage(r.Body)
	return &StatusError{
		Provider:   provider,
		StatusCode: r.StatusCode,
		Type:       RedactString(typ, secrets...),
		Message:    RedactString(msg, secrets...),
		RetryAfter: RetryAfter(r.Header, r.At),
	}
}

func errorMessage(body []byte) (typ, msg string) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return "", ""
	}
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &v) == nil {
		var obj struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Status  string `json:"status"`
		}
		var text string
		switch {
		case json.Unmarshal(v.Error, &obj) == nil && obj.Message != "":
			typ = obj.Type
			if typ == "" {
				typ = obj.Status
			}
			return typ, obj.Message
		case json.Unmarshal(v.Error, &text) == nil && text != "":
			return "", text
		case v.Message != "":
			return "", v.Message
		}
	}
	return "", textclip.Bytes(strings.Join(strings.Fields(string(body)), " "), 300, "…")
}

// Transport wraps base (http.DefaultTransport when nil) so that requests
// whose context carries a recorder from Record have their response status,
// headers and the start of an error body noted. Responses pass through
// unchanged: an error body is re-assembled for the caller to read in full.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base}
}

type transport struct{ base http.RoundTripper }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	rec, _ := req.Context().Value(recorderKey{}).(*recorder)
	if err != nil || rec == nil {
		return resp, err
	}
	seen := Response{StatusCode: resp.StatusCode, Header: resp.Header.Clone(), At: time.Now()}
	if resp.StatusCode >= 400 && resp.Body != nil {
		head, readErr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		seen.Body = head
		resp.Body = &rejoinedBody{Reader: io.MultiReader(bytes.NewReader(head), errReader{readErr}, resp.Body), closer: resp.Body}
	}
	rec.set(seen)
	return resp, nil
}

// errReader replays a read error met while peeking at a body, once the
// peeked bytes are consumed; a nil error reads as an empty stream.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}

type rejoinedBody struct {
	io.Reader
	closer io.Closer
}

func (b *rejoinedBody) Close() error { return b.closer.Close() }

type recorderKey struct{}

type recorder struct {
	mu   sync.Mutex
	resp Response
	ok   bool
}

func (r *recorder) set(resp Response) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resp, r.ok = resp, true
}

// Record returns ctx carrying a fresh recorder, and a function that reports
// the last response a Transport saw for requests made with that context
// (ok is false when none arrived). Call it once per attempt.
func Record(ctx context.Context) (context.Context, func() (Response, bool)) {
	rec := &recorder{}
	return context.WithValue(ctx, recorderKey{}, rec), func() (Response, bool) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.resp, rec.ok
	}
}
