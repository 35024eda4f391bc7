package history

import (
	"encoding/json"
	"fmt"

	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/internal/textclip"
)

// shrink clips rec until its encoding fits limit: again and again the
// longest text or tool result is cut to half its length (at least to
// minKept bytes), marked with how much was cut. It returns the encoding.
// What the clipping keeps is the start of each text: ids, headers and the
// model's first words, which is what later turns need to recall.
func shrink(rec *turnRecord, limit int) ([]byte, error) {
	const minKept = 512
	for {
		raw, err := json.Marshal(rec)
		if err != nil || len(raw) <= limit {
			return raw, err
		}
		if !clipLongest(rec, len(raw)-limit, minKept) {
			return nil, fmt.Errorf("turn record is %d bytes, above the %d limit, and nothing is left to clip", len(raw), limit)
		}
	}
}

// clipLongest cuts the longest clippable text of rec — a text part, or a
// tool result as its JSON — by about over bytes (at most to half, never
// below keep). It reports whether it cut anything.
func clipLongest(rec *turnRecord, over, keep int) bool {
	var part *genai.Part
	var text string
	for i := range rec.Events {
		c := rec.Events[i].Content
		if c == nil {
			continue
		}
		for _, p := range c.Parts {
			t := p.Text
			if p.FunctionResponse != nil {
				b, err := json.Marshal(p.FunctionResponse.Response)
				if err != nil {
					continue
				}
				t = string(b)
			}
			if len(t) > max(keep, len(text)) {
				part, text = p, t
			}
		}
	}
	if part == nil {
		return false
	}
	kept := textclip.Bytes(text, max(keep, min(len(text)/2, len(text)-over-64)), "")
	clipped := fmt.Sprintf("%s\n[clipped in the history: %d of %d bytes kept]", kept, len(kept), len(text))
	if part.FunctionResponse != nil {
		part.FunctionResponse.Response = map[string]any{"clipped": clipped}
	} else {
		part.Text = clipped
	}
	return true
}
