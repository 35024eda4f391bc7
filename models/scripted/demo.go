package scripted

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/internal/textclip"
)

// The demo behaviour. It never runs out and never fails: every request gets
// one of two answers, chosen by the last content of the request.
//
//   - A function response (from schedule_next_turn, or any tool): final text
//     "Sleeping until <wake_at>." plus the response's "note", if any.
//   - Anything else is read as a wake prompt framed by the inbox: a
//     "[wake: <reason>]" line and, per message, a "--- message ..." header
//     followed by the message text. The answer summarises it and calls
//     schedule_next_turn with {"wake_in_seconds": 300}.
//
// Usage is estimated as characters/4 (at least 1): input over every text
// part of the request's contents, output over the answer's text.
const (
	demoTool        = "schedule_next_turn"
	demoWakeSeconds = 300
	demoQuoteRunes  = 60
	messageHeader   = "--- message"
)

func demoResponse(req *model.LLMRequest, newID func() string) *model.LLMResponse {
	var contents []*genai.Content
	if req != nil {
		contents = req.Contents
	}
	var last *genai.Content
	for i := len(contents) - 1; i >= 0 && last == nil; i-- {
		last = contents[i]
	}
	in := estimateTokens(textRunes(contents))

	if fr := lastFunctionResponse(last); fr != nil {
		text := sleepingText(fr)
		return response(
			[]*genai.Part{genai.NewPartFromText(text)},
			config.Usage{Input: in, Output: estimateTokens(utf8.RuneCountInString(text))},
		)
	}
	text := wakeSummary(contentText(last))
	return response(
		[]*genai.Part{
			genai.NewPartFromText(text),
			{FunctionCall: &genai.FunctionCall{
				ID:   newID(),
				Name: demoTool,
				Args: map[string]any{"wake_in_seconds": demoWakeSeconds},
			}},
		},
		config.Usage{Input: in, Output: estimateTokens(utf8.RuneCountInString(text))},
	)
}

// wakeSummary reads an inbox-framed wake prompt. A prompt with neither a
// wake line nor message headers (typed directly, not framed) counts as one
// message.
func wakeSummary(prompt string) string {
	lines := strings.Split(prompt, "\n")
	reason := ""
	var quotes []string
	framed := false
	for i, line := range lines {
		t := strings.TrimSpace(line)
		if reason == "" && strings.HasPrefix(t, "[wake:") && strings.HasSuffix(t, "]") {
			reason = strings.TrimSpace(t[len("[wake:") : len(t)-1])
			framed = true
			continue
		}
		if isMessageHeader(t) {
			framed = true
			quotes = append(quotes, quote(firstLineAfter(lines[i+1:])))
		}
	}
	if !framed {
		if first := firstLineAfter(lines); first != "" {
			reason = "prompt"
			quotes = []string{quote(first)}
		}
	}

	var b strings.Builder
	if reason == "" {
		b.WriteString("Woke.")
	} else {
		fmt.Fprintf(&b, "Woke for: %s.", reason)
	}
	if len(quotes) == 0 {
		b.WriteString(" No new messages.")
	} else {
		fmt.Fprintf(&b, " Received %d message(s): %s.", len(quotes), strings.Join(quotes, "; "))
	}
	return b.String()
}

func isMessageHeader(line string) bool {
	return line == messageHeader || strings.HasPrefix(line, messageHeader+" ")
}

// firstLineAfter returns the first non-blank line of a message's text,
// stopping at the next framing line ("---..."), so an empty message quotes
// as "". In the fence a message's details are on lines indented "  "
// (skipped) and its text on lines that start with "> " (quoted without
// it).
func firstLineAfter(lines []string) string {
	for _, l := range lines {
		if strings.HasPrefix(l, "  ") && isDetail(strings.TrimSpace(l)) {
			continue
		}
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "---") || strings.HasPrefix(t, "<<<") {
			return ""
		}
		if q, ok := strings.CutPrefix(t, ">"); ok {
			t = strings.TrimSpace(q)
		}
		if t != "" {
			return t
		}
	}
	return ""
}

// isDetail reports whether a line indented in the fence is one of a
// message's details rather than its text.
func isDetail(t string) bool {
	for _, p := range []string{"source:", "from:", "id:", "attribute ", "[clipped"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

func quote(s string) string {
	return `"` + textclip.Runes(s, demoQuoteRunes, "…") + `"`
}

func sleepingText(fr *genai.FunctionResponse) string {
	resp := fr.Response
	// functiontool wraps results that are not objects as {"result": ...}.
	if inner, ok := resp["result"].(map[string]any); ok && resp["wake_at"] == nil {
		resp = inner
	}
	var b strings.Builder
	if at, ok := resp["wake_at"]; ok && at != nil && fmt.Sprint(at) != "" {
		fmt.Fprintf(&b, "Sleeping until %v.", at)
	} else {
		b.WriteString("Sleeping until the next wake.")
	}
	if note, ok := resp["note"]; ok && note != nil && fmt.Sprint(note) != "" {
		fmt.Fprintf(&b, " Note: %s.", strings.TrimRight(fmt.Sprint(note), "."))
	}
	if e, ok := resp["error"]; ok && e != nil {
		fmt.Fprintf(&b, " %s failed: %v", fr.Name, e)
	}
	return b.String()
}

func lastFunctionResponse(c *genai.Content) *genai.FunctionResponse {
	if c == nil {
		return nil
	}
	for i := len(c.Parts) - 1; i >= 0; i-- {
		if p := c.Parts[i]; p != nil && p.FunctionResponse != nil {
			return p.FunctionResponse
		}
	}
	return nil
}

func contentText(c *genai.Content) string {
	if c == nil {
		return ""
	}
	var texts []string
	for _, p := range c.Parts {
		if p != nil && p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

func textRunes(contents []*genai.Content) int {
	n := 0
	for _, c := range contents {
		if c == nil {
			continue
		}
		for _, p := range c.Parts {
			if p != nil {
				n += utf8.RuneCountInString(p.Text)
			}
		}
	}
	return n
}

func estimateTokens(chars int) int {
	return max(1, chars/4)
}
