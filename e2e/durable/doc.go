// Package durable is the end-to-end test of durable turns: the
// agent-worker binary, killed with SIGKILL in the middle of a turn whose
// first step published a report, is restarted and resumes the turn from
// its journal. A real nats-server (in the test process) holds the input
// stream, the state and the stream that captures the reports; the model
// is an httptest server speaking OpenAI's Chat Completions wire format
// that counts what it is asked. The package has no code outside its tests.
package durable
