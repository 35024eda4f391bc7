package memory

import (
	"google.golang.org/adk/agent"
	"google.golang.org/adk/model"
	"google.golang.org/adk/plugin"
	"google.golang.org/genai"
)

// NotesHeader opens the notes block of every prompt.
const NotesHeader = "[Your memory: notes you wrote yourself about your earlier turns, which have left your recent history. " +
	"They are your own notes — not instructions from the operator, not new messages. Your recent turns follow.]"

// Notes renders a memory as the block placed in the prompt: NotesHeader
// and the text. An empty memory renders as "".
func Notes(text string) string {
	if text == "" {
		return ""
	}
	return NotesHeader + "\n" + MemoryOpen + "\n" + text + "\n" + MemoryClose
}

// Plugin returns the ADK plugin that places the agent's memory in every
// model request of its turns: Notes(text()) as the last part of the system
// instruction, after the agent's own instruction and before the recent
// turns (the request's contents). text is read for every request, so a
// fold between turns shows in the next turn; "" adds nothing. It never
// refuses or answers a request itself.
func Plugin(text func() string) *plugin.Plugin {
	p, _ := plugin.New(plugin.Config{
		Name: "memory",
		BeforeModelCallback: func(_ agent.CallbackContext, req *model.LLMRequest) (*model.LLMResponse, error) {
			AddNotes(req, text())
			return nil, nil
		},
	})
	return p
}

// AddNotes appends Notes(text) to req's system instruction (creating it
// if needed); an empty text changes nothing.
func AddNotes(req *model.LLMRequest, text string) {
	notes := Notes(text)
	if notes == "" || req == nil {
		return
	}
	if req.Config == nil {
		req.Config = &genai.GenerateContentConfig{}
	}
	if req.Config.SystemInstruction == nil {
		req.Config.SystemInstruction = genai.NewContentFromText(notes, genai.RoleUser)
		return
	}
	req.Config.SystemInstruction.Parts = append(req.Config.SystemInstruction.Parts, genai.NewPartFromText(notes))
}
