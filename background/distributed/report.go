package distributed

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/natsbus"
)

// publishReport publishes a report to the parent's inbox subject (see
// the package documentation), retrying until JetStream has it or quit is
// closed. It reports whether it was published (or already was: a
// duplicate of the same id).
func (q *queue) publishReport(parent, id, text, traceParent string, quit <-chan struct{}) bool {
	o := &q.o
	msg := natsinbox.Own{
		Subject: o.Subjects.Inbox(parent), Agent: parent, ID: id,
		Data: encodeReport(id, text, o.ReportMaxBytes),
		Via:  inbox.ViaSubagent, TraceParent: traceParent,
	}.Msg(o.Seal)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
		ack, err := o.JetStream.PublishMsg(ctx, msg)
		cancel()
		if err == nil {
			if ack.Duplicate {
				q.log.Info("subagent report was already published", "agent", parent, "subagent", id)
			}
			return true
		}
		q.log.Warn("subagent report not published yet; retrying", "agent", parent, "subagent", id, "error", natsbus.Full(err))
		select {
		case <-quit:
			return false
		case <-time.After(time.Second):
		}
	}
}

// encodeReport is the report's JSON envelope (text, id, from, attributes)
// as inbox.ParseBody reads it, its text cut so that it fits limit bytes.
func encodeReport(id, text string, limit int) []byte {
	for {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(struct {
			Text       string            `json:"text"`
			ID         string            `json:"id"`
			From       string            `json:"from"`
			Attributes map[string]string `json:"attributes"`
		}{text, id, id, map[string]string{"via": inbox.ViaSubagent}})
		data := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		over := len(data) - limit
		if over <= 0 || len(text) == 0 {
			return data
		}
		const note = "\n[report cut to fit nats.max_message_bytes]"
		kept := textclip.Bytes(text, len(text)-over-len(note)-16, "")
		if kept == "" {
			text = ""
			continue
		}
		text = kept + note
	}
}
