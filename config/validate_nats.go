package config

import (
	"slices"
	"time"
)

// natsRetention checks how long the bus remembers: the duplicate window,
// the ack wait and the dead-letter stream's bounds.
func (v *validator) natsRetention(nc NATS) {
	var root path
	v.duration(root.key("nats", "duplicate_window"), nc.DuplicateWindow)
	v.duration(root.key("nats", "ack_wait"), nc.AckWait)
	v.duration(root.key("nats", "dlq_max_age"), nc.DLQMaxAge)
	if nc.DLQMaxBytes < 0 {
		v.at(root.key("nats", "dlq_max_bytes"), "must not be negative; got %d", nc.DLQMaxBytes)
	}
}

// natsStream checks the input stream and its consumers: the ack wait's
// floor, the ignored consumer keys, the stream's bounds and its replicas.
func (v *validator) natsStream(nc NATS) {
	var root path
	if nc.AckWait > 0 && nc.AckWait.D() < time.Second {
		v.at(root.key("nats", "ack_wait"), "must be at least 1s; got %v", nc.AckWait.D())
	}
	// Ignored keys, accepted so that older files load (Warnings says so).
	if n := nc.MaxConsumers; n < 0 {
		v.at(root.key("nats", "max_consumers"), "must not be negative; got %d", n)
	}
	if n := nc.HandledIDs; n < 0 {
		v.at(root.key("nats", "handled_ids"), "must not be negative; got %d", n)
	}
	v.inputLimits(root.key("nats"), nc)
	switch n := nc.Replicas; {
	case !slices.Contains(natsReplicas, n):
		v.at(root.key("nats", "replicas"), "must be 1, 3 or 5 (an odd number of copies, so that a majority of them outlives a lost server); got %d", n)
	case n > 1 && nc.URL == "":
		v.at(root.key("nats", "replicas"), "%d copies need a JetStream cluster of at least %d servers, but nats.url is empty and the embedded server is a single server that holds 1; set nats.url to the cluster or nats.replicas to 1", n, n)
	case n > 1 && nc.JetStream != nil && !*nc.JetStream:
		v.at(root.key("nats", "replicas"), "copies are kept by JetStream, but nats.jetstream is false; set nats.replicas to 1 or nats.jetstream to true")
	}
}

// natsAuth checks that the NATS credentials are each set one way only
// and fit the server they are for.
func (v *validator) natsAuth(nc NATS) {
	var root path
	if nc.User != "" && nc.PasswordEnv != "" && nc.PasswordFile != "" {
		v.at(root.key("nats", "password_file"), "set one of password_env, password_file")
	}
	if nc.URL == "" && nc.CredsFile != "" {
		v.at(root.key("nats", "creds_file"), "a creds file is for an external server (nats.url); the embedded server takes token_env/token_file, user with password_env/password_file, or nkey_file")
	}
	if nc.TokenEnv != "" && nc.TokenFile != "" {
		v.at(root.key("nats", "token_file"), "set one of token_env, token_file")
	}
}

// minInputMaxBytes is the floor of nats.max_bytes: a smaller input stream
// holds too little to be meant.
const minInputMaxBytes = 1 << 20

// inputLimits checks the input stream's bounds under p (nats): each
// count or size -1 (no limit) or a real bound, and a size that holds at
// least one message of max_message_bytes.
func (v *validator) inputLimits(p path, n NATS) {
	if m := n.MaxMsgsPerSubject; m != -1 && m < 1 {
		v.at(p.key("max_msgs_per_subject"), "must be -1 (no limit) or at least 1; got %d", m)
	}
	switch b := n.MaxBytes; {
	case b == -1:
	case b < minInputMaxBytes:
		v.at(p.key("max_bytes"), "must be -1 (no limit) or at least %d (1 MiB); got %d", minInputMaxBytes, b)
	case b < int64(n.MaxMessageBytes):
		v.at(p.key("max_bytes"), "must be at least nats.max_message_bytes (%d), or a message that large could never be stored; got %d", n.MaxMessageBytes, b)
	}
	if r := n.ReadAheadBytes; r < -1 || (r > 0 && r < int64(n.MaxMessageBytes)) {
		v.at(p.key("read_ahead_bytes"), "must be -1 (keep none), 0 (the default, 32 MiB) or at least nats.max_message_bytes (%d); got %d", n.MaxMessageBytes, r)
	}
	switch d := n.MaxAge.D(); {
	case d < 0:
		v.duration(p.key("max_age"), n.MaxAge)
	case d > 0 && d < time.Minute:
		v.at(p.key("max_age"), "must be 0 (no maximum age) or at least 1m; got %v", d)
	}
}
