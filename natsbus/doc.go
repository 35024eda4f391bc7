// Package natsbus is the worker's NATS: the embedded server or the
// connection to an external one, the JetStream stream that holds agents'
// input, the subject names of the contract, and the edges that face NATS
// (control requests, events out, the publish tool's publisher).
//
// It must not run turns or decide what a message means: the driver and
// the inbox do.
package natsbus
