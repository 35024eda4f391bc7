// Package access decides who may operate the worker: the bearer tokens in
// force (Tokens, replaced whole on rotation), the callers they
// authenticate (Caller: a name, a role, the agents it may touch) and what
// each role allows (Need). Every transport that takes operator requests —
// the HTTP API and the NATS control subject — checks callers against the
// one Tokens it is given, so a rotation reaches them all at once.
//
// It holds no transport: it never reads a request or writes an answer, and
// it does not know the routes or verbs (their Need is theirs to say).
package access
