package driver

import (
	"maps"
	"time"

	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/inbox"
)

// audited adds by's audit fields ("by" and "reason", each only when set)
// to an event's data and returns it.
func audited(by hook.Audit, data map[string]any) map[string]any {
	maps.Copy(data, by.Fields())
	return data
}

// PauseInfo is an agent's pause: since when, who paused it and why. It is
// stored with the pause (key "agent.<name>.paused"), written by the
// agent's owner only, so it survives restarts and changes of owner.
type PauseInfo struct {
	Since  time.Time `json:"since"`
	By     string    `json:"by,omitempty"`
	Reason string    `json:"reason,omitempty"`
	// Interrupt: the pause came with an interrupt (interrupt and hold).
	Interrupt bool `json:"interrupt,omitempty"`
}

// QueuedMessage is one message waiting in an agent's inbox, as operators
// see it (GET /v1/agents/{name}/inbox): what and where from, not its text.
type QueuedMessage struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Source string `json:"source"`
	// From is the sender's self-declared name; untrusted.
	From string `json:"from,omitempty"`
	// Sender is who the worker authenticated as the sender
	// (inbox.Message.Sender: "api, token ops"); absent for a message
	// published on NATS.
	Sender string `json:"sender,omitempty"`
	// SizeBytes is inbox.Message.Size: text, attributes, id, source,
	// from and sender, in bytes.
	SizeBytes int       `json:"size_bytes"`
	Received  time.Time `json:"received"`
	// AgeSeconds is how long it has waited, at the time of the listing.
	AgeSeconds float64 `json:"age_seconds"`
	// Attempts counts failed turns that took it and gave it back.
	Attempts int `json:"attempts,omitempty"`
	// Seq is the message's sequence in the input log (0: not in it).
	Seq uint64 `json:"seq,omitempty"`
}

func queuedOf(m inbox.Message, now time.Time) QueuedMessage {
	return QueuedMessage{
		ID: m.ID, Kind: string(m.Kind), Source: m.Source, From: m.From, Sender: m.Sender, SizeBytes: m.Size(),
		Received: m.Received, AgeSeconds: max(now.Sub(m.Received).Seconds(), 0),
		Attempts: m.Attempts, Seq: m.Pos.Seq,
	}
}
