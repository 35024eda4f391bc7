package scripted

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/internal/textclip"
)

// Memory folds. A request whose system instruction begins with
// foldMarker (package memory's RequestMarker) asks for an agent's running
// memory; every scripted Model answers it itself, in any mode, without
// taking a script step and without counting it in Calls (see Summaries):
// scripts stay what their authors wrote however often the driver folds.
//
// The answer is deterministic, built from the request's text alone:
//
//   - the previous notes, one per line, between <memory> and </memory>;
//   - one new note per folded turn: "- turn N: " + what the demo says of
//     the turn's input (its wake reason and the first line of each
//     message), + ` I said: "<first line of the reply>"`, + "Tools: ..."
//     when it called any;
//   - bounded by the request's MaxOutputTokens at four characters a token
//     (1000 tokens when unset): the earliest note always stays, the
//     newest that fit follow, and a "- …and N more turns, details dropped
//     for space" line counts those dropped in between.
//
// Usage is estimated like the demo's: characters/4 of the request's
// texts (input) and of the answer (output).
const (
	foldMarker     = "[agent-worker memory compaction]"
	foldMemoryOpen = "<memory>"
	foldMemoryEnd  = "</memory>"
	foldTurnEnd    = "</turn>"
	foldInput      = "[input]"
	foldReply      = "[reply]"
	foldCall       = "[tool call "
	foldBudget     = 1000 // tokens, when the request sets no MaxOutputTokens
)

var (
	foldTurnOpen = regexp.MustCompile(`^<turn n="(\d+)"`)
	foldDropped  = regexp.MustCompile(`^- …and (\d+) more turns?, details dropped for space$`)
)

// isFold reports whether req asks for a memory fold.
func isFold(req *model.LLMRequest) bool {
	if req == nil || req.Config == nil || req.Config.SystemInstruction == nil {
		return false
	}
	for _, p := range req.Config.SystemInstruction.Parts {
		if p != nil && p.Text != "" {
			return strings.HasPrefix(p.Text, foldMarker)
		}
	}
	return false
}

// foldResponse answers a fold request (see the package comment above).
func foldResponse(req *model.LLMRequest) *model.LLMResponse {
	var body string
	for _, c := range req.Contents {
		if t := contentText(c); t != "" {
			body = t
			break
		}
	}
	notes, turns := parseFold(body)
	for _, t := range turns {
		notes = append(notes, t.note())
	}
	budget := foldBudget * 4
	if n := req.Config.MaxOutputTokens; n > 0 {
		budget = int(n) * 4
	}
	text := condense(notes, budget)
	in := textRunes(req.Contents) + textRunes([]*genai.Content{req.Config.SystemInstruction})
	return response([]*genai.Part{genai.NewPartFromText(text)},
		config.Usage{Input: estimateTokens(in), Output: estimateTokens(utf8.RuneCountInString(text))})
}

// foldTurn is one turn of a fold request as the summariser reads it.
type foldTurn struct {
	n            uint64
	input, reply []string
	calls        []string
}

func (t foldTurn) note() string {
	var b strings.Builder
	fmt.Fprintf(&b, "- turn %d: %s", t.n, wakeSummary(strings.Join(t.input, "\n")))
	if first := firstLineAfter(t.reply); first != "" {
		fmt.Fprintf(&b, " I said: %s", quote(first))
	}
	if len(t.calls) > 0 {
		fmt.Fprintf(&b, " Tools: %s.", strings.Join(t.calls, ", "))
	}
	return b.String()
}

// parseFold reads a fold request's user content: the previous notes (one
// per non-blank line) and the turns.
func parseFold(body string) (notes []string, turns []foldTurn) {
	lines := strings.Split(body, "\n")
	i := 0
	for i < len(lines) && strings.TrimSpace(lines[i]) != foldMemoryOpen {
		i++
	}
	for i++; i < len(lines) && strings.TrimSpace(lines[i]) != foldMemoryEnd; i++ {
		if l := strings.TrimSpace(lines[i]); l != "" {
			notes = append(notes, l)
		}
	}
	var cur *foldTurn
	section := ""
	for ; i < len(lines); i++ {
		l := lines[i]
		t := strings.TrimSpace(l)
		switch {
		case foldTurnOpen.MatchString(t):
			n, _ := strconv.ParseUint(foldTurnOpen.FindStringSubmatch(t)[1], 10, 64)
			turns = append(turns, foldTurn{n: n})
			cur, section = &turns[len(turns)-1], ""
		case cur == nil:
		case t == foldTurnEnd:
			cur = nil
		case t == foldInput, t == foldReply:
			section = t
		case strings.HasPrefix(t, foldCall) && strings.HasSuffix(t, "]"):
			cur.calls = append(cur.calls, strings.TrimSuffix(strings.TrimPrefix(t, foldCall), "]"))
			section = "tool"
		case strings.HasPrefix(t, "[tool result ") && strings.HasSuffix(t, "]"):
			section = "tool"
		case section == foldInput:
			cur.input = append(cur.input, l)
		case section == foldReply:
			cur.reply = append(cur.reply, l)
		}
	}
	return notes, turns
}

// condense keeps notes within budget runes: the first note, a count of
// the notes dropped after it, and the newest notes that fit; a single
// note longer than the budget is clipped.
func condense(notes []string, budget int) string {
	if len(notes) == 0 {
		return "- (nothing to remember yet)"
	}
	first, rest := notes[0], notes[1:]
	dropped := 0
	if len(rest) > 0 {
		if m := foldDropped.FindStringSubmatch(rest[0]); m != nil {
			dropped, _ = strconv.Atoi(m[1])
			rest = rest[1:]
		}
	}
	render := func() string {
		out := []string{first}
		if dropped > 0 {
			unit := "turns"
			if dropped == 1 {
				unit = "turn"
			}
			out = append(out, fmt.Sprintf("- …and %d more %s, details dropped for space", dropped, unit))
		}
		return strings.Join(append(out, rest...), "\n")
	}
	text := render()
	for utf8.RuneCountInString(text) > budget && len(rest) > 1 {
		rest = rest[1:]
		dropped++
		text = render()
	}
	return textclip.Runes(text, budget, "")
}
