package guard

import (
	"strings"

	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/config"
)

// Price is USD per million tokens.
type Price struct {
	Input       float64
	CachedInput float64
	Output      float64
	// CacheWrite prices tokens written to a prompt cache; 0 means Input.
	CacheWrite float64
}

// builtinPrices are list prices per million tokens (USD) of current models,
// as published by OpenAI, Google and Anthropic. Config's pricing table
// overrides and extends them. Prefix matching lets dated snapshots
// ("gpt-4.1-mini-2025-04-14", "claude-sonnet-4-5-20250929") find their
// family.
var builtinPrices = map[string]Price{
	// OpenAI
	"gpt-5":        {Input: 1.25, CachedInput: 0.125, Output: 10},
	"gpt-5-mini":   {Input: 0.25, CachedInput: 0.025, Output: 2},
	"gpt-5-nano":   {Input: 0.05, CachedInput: 0.005, Output: 0.40},
	"gpt-4.1":      {Input: 2, CachedInput: 0.50, Output: 8},
	"gpt-4.1-mini": {Input: 0.40, CachedInput: 0.10, Output: 1.60},
	"gpt-4.1-nano": {Input: 0.10, CachedInput: 0.025, Output: 0.40},
	"gpt-4o":       {Input: 2.50, CachedInput: 1.25, Output: 10},
	"gpt-4o-mini":  {Input: 0.15, CachedInput: 0.075, Output: 0.60},
	"o3":           {Input: 2, CachedInput: 0.50, Output: 8},
	"o4-mini":      {Input: 1.10, CachedInput: 0.275, Output: 4.40},
	// Google
	"gemini-2.5-pro":        {Input: 1.25, CachedInput: 0.31, Output: 10},
	"gemini-2.5-flash":      {Input: 0.30, CachedInput: 0.075, Output: 2.50},
	"gemini-2.5-flash-lite": {Input: 0.10, CachedInput: 0.025, Output: 0.40},
	"gemini-2.0-flash":      {Input: 0.10, CachedInput: 0.025, Output: 0.40},
	// Anthropic (cache writes at 1.25× input, 5-minute cache)
	"claude-opus-4":     {Input: 15, CachedInput: 1.50, Output: 75, CacheWrite: 18.75},
	"claude-opus-4-1":   {Input: 15, CachedInput: 1.50, Output: 75, CacheWrite: 18.75},
	"claude-sonnet-4":   {Input: 3, CachedInput: 0.30, Output: 15, CacheWrite: 3.75},
	"claude-sonnet-4-5": {Input: 3, CachedInput: 0.30, Output: 15, CacheWrite: 3.75},
	"claude-haiku-4-5":  {Input: 1, CachedInput: 0.10, Output: 5, CacheWrite: 1.25},
	"claude-3-5-haiku":  {Input: 0.80, CachedInput: 0.08, Output: 4, CacheWrite: 1},
}

// Prices looks prices up by model name.
type Prices struct {
	table map[string]Price
}

// NewPrices returns the built-in table overridden and extended by cfg.
func NewPrices(cfg map[string]config.Price) Prices {
	t := make(map[string]Price, len(builtinPrices)+len(cfg))
	for k, v := range builtinPrices {
		t[k] = v
	}
	for k, v := range cfg {
		t[k] = Price{Input: v.InputPerMTok, CachedInput: v.CachedInputPerMTok, Output: v.OutputPerMTok, CacheWrite: v.CacheWritePerMTok}
	}
	return Prices{table: t}
}

// Lookup finds the model's price by exact name, then by the longest
// table key the name starts with. ok is false for an unpriced model: it
// costs $0 and no cost ceiling binds it.
func (p Prices) Lookup(model string) (Price, bool) {
	if pr, ok := p.table[model]; ok {
		return pr, true
	}
	best := ""
	for k := range p.table {
		if strings.HasPrefix(model, k) && len(k) > len(best) {
			best = k
		}
	}
	if best == "" {
		return Price{}, false
	}
	return p.table[best], true
}

// Usage is one model response's token counts.
type Usage struct {
	Input       int // all prompt tokens, cached ones included
	CachedInput int
	CacheWrite  int
	Output      int // candidates and thoughts
}

// UsageOf reads ADK's usage metadata. Cache-write tokens are not part of
// genai's metadata; providers that report them (Anthropic) put them in
// the response's custom metadata under "cache_write_tokens".
func UsageOf(u *genai.GenerateContentResponseUsageMetadata, custom map[string]any) Usage {
	if u == nil {
		return Usage{}
	}
	out := Usage{
		Input:       int(u.PromptTokenCount),
		CachedInput: int(u.CachedContentTokenCount),
		Output:      int(u.CandidatesTokenCount) + int(u.ThoughtsTokenCount),
	}
	if n, ok := custom["cache_write_tokens"].(int); ok {
		out.CacheWrite = n
	}
	return out
}

// Cost prices u in USD.
func (p Price) Cost(u Usage) float64 {
	cw := p.CacheWrite
	if cw == 0 {
		cw = p.Input
	}
	plain := max(u.Input-u.CachedInput-u.CacheWrite, 0)
	return (float64(plain)*p.Input + float64(u.CachedInput)*p.CachedInput +
		float64(u.CacheWrite)*cw + float64(u.Output)*p.Output) / 1e6
}
