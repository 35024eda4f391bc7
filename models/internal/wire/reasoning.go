package wire

import "fmt"

// Reasoning levels a model definition may ask for (config
// models.<name>.reasoning); "" asks for nothing and leaves the provider's
// default.
const (
	ReasoningLow    = "low"
	ReasoningMedium = "medium"
	ReasoningHigh   = "high"
)

// ThinkingBudget returns the thinking-token budget of a reasoning level,
// for the providers that take a number rather than a level (Anthropic's
// thinking.budget_tokens, Gemini's thinkingConfig.thinkingBudget): low
// 1024 (Anthropic's minimum), medium 4096, high 16384 (within every
// current Gemini 2.5 model's range). "" is 0: no budget is sent. Any other
// level is an error.
func ThinkingBudget(level string) (int, error) {
	switch level {
	case "":
		return 0, nil
	case ReasoningLow:
		return 1024, nil
	case ReasoningMedium:
		return 4096, nil
	case ReasoningHigh:
		return 16384, nil
	}
	return 0, fmt.Errorf("unknown reasoning level %q (want low, medium or high)", level)
}
