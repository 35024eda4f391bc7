package wire

import (
	"crypto/rand"
	"encoding/hex"
	"strings"

	"google.golang.org/genai"
)

// JoinText joins the non-thought text parts of c with sep.
func JoinText(c *genai.Content, sep string) string {
	if c == nil {
		return ""
	}
	var texts []string
	for _, p := range c.Parts {
		if p != nil && p.Text != "" && !p.Thought {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, sep)
}

// PartKind names a part kind the providers do not carry, for errors.
func PartKind(p *genai.Part) string {
	switch {
	case p.InlineData != nil:
		return "inline data"
	case p.FileData != nil:
		return "file data"
	case p.ExecutableCode != nil:
		return "executable code"
	default:
		return "code execution result"
	}
}

// ToolKind names a non-function tool, for errors.
func ToolKind(t *genai.Tool) string {
	switch {
	case t.GoogleSearch != nil, t.GoogleSearchRetrieval != nil:
		return "Google Search"
	case t.CodeExecution != nil:
		return "code execution"
	case t.Retrieval != nil:
		return "retrieval"
	case t.URLContext != nil:
		return "URL context"
	default:
		return "a non-function tool"
	}
}

// CallID makes a tool call id with the provider's prefix ("call_",
// "toolu_") for a call the server sent without one: ADK pairs calls with
// their results by id.
func CallID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms.
	return prefix + hex.EncodeToString(b[:])
}
