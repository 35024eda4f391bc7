package api

import (
	"net/http"
	"sync"
)

// inflightRetryAfter is what a request refused for want of in-flight
// bytes is told to wait, in seconds: the requests holding them are
// reading a body or queueing a message, which takes milliseconds.
const inflightRetryAfter = "1"

// inflight is the byte budget of the request bodies one Server holds at
// once (Options.MaxInflightBytes): one budget per Server, and so per
// listener, since a Server serves one. It bounds the memory bodies take
// whatever the number of senders; it never queues a request, since a
// waiting request would keep its connection, and so memory, anyway.
type inflight struct {
	mu    sync.Mutex
	used  int64
	limit int64
}

// reserve takes n bytes of the budget and reports true when they are
// free now; otherwise it takes nothing and reports false.
func (b *inflight) reserve(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

// release gives back n bytes that reserve took.
func (b *inflight) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
}

// reserveBody takes the in-flight bytes of a request body before it is
// read: its Content-Length, or limit (the route's body limit) when the
// length is not known (a chunked body), so a body costs at most what it
// may hold. The serveHTTP around the handler gives them back when the
// handler returns (or panics), whatever it answered. Without the bytes it
// answers 503 with Retry-After and reports false; the write log records
// the refusal, one line per request, as every write.
func (s *Server) reserveBody(w http.ResponseWriter, r *http.Request, limit int64) bool {
	n := limit
	if r.ContentLength >= 0 {
		n = min(r.ContentLength, limit)
	}
	if n == 0 {
		return true
	}
	if !s.inflight.reserve(n) {
		w.Header().Set("Retry-After", inflightRetryAfter)
		fail(w, r, http.StatusServiceUnavailable, "too many request bytes in flight: this request needs %d bytes, more than is free of the %d the API holds at once (api.max_inflight_bytes); retry shortly", n, s.inflight.limit)
		return false
	}
	record(r).reserved += n
	return true
}
