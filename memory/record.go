package memory

import (
	"time"
	"unicode/utf8"
)

// DefaultMaxTokens bounds a memory when the config says nothing
// (memory.max_tokens).
const DefaultMaxTokens = 1000

// Record is an agent's memory as it is stored and shown (GET
// /v1/agents/{name}/memory).
type Record struct {
	// Text is the summary: the agent's own notes. Empty before the first
	// fold and after a clear.
	Text string `json:"text"`
	// Tokens estimates Text's size (see Tokens).
	Tokens int `json:"tokens"`
	// TurnsFolded counts the turns Text takes in, since it was last
	// cleared.
	TurnsFolded int `json:"turns_folded"`
	// Through is the newest turn number folded. It survives a clear: the
	// turns it covers are gone from the history and are not folded again.
	Through uint64 `json:"through"`
	// Updated is when Text was last written by a fold.
	Updated time.Time `json:"updated,omitzero"`
	// Model names the model that wrote Text last.
	Model string `json:"model,omitempty"`
	// Clipped: the last fold wrote more than max_tokens and was cut.
	Clipped bool `json:"clipped,omitempty"`
	// Compactions counts the folds that succeeded.
	Compactions int `json:"compactions"`
	// LastError says why the last fold failed ("" once one succeeds);
	// LastErrorAt when, Failures how many failed in a row.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	Failures    int       `json:"failures,omitempty"`
	// Cleared is when an operator last cleared the memory, ClearedBy who
	// (the API token's name, or "nats").
	Cleared   time.Time `json:"cleared,omitzero"`
	ClearedBy string    `json:"cleared_by,omitempty"`
}

// Tokens estimates the tokens of s as its characters divided by four,
// rounded up: the estimate the scripted models report, and close enough
// for English text with every provider's tokenizer to bound a prompt.
func Tokens(s string) int {
	return (utf8.RuneCountInString(s) + 3) / 4
}
