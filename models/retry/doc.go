// Package retry is how every model provider retries a request: which
// failures are worth another attempt (429, 5xx, transport errors and
// per-attempt timeouts), how long to wait (exponential backoff with full
// jitter, or the server's Retry-After), how many times, and what each
// attempt's outcome was. It also carries the HTTP plumbing that lets the
// policy see status codes and Retry-After through SDKs that hide them.
//
// It must not know any provider's request or response format beyond the
// common "error.message" shape of an error body, and it never sees or logs
// credentials: errors it is handed are logged as they are, so providers
// hand it errors that are already free of secrets.
package retry
