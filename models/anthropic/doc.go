// Package anthropic is an ADK model.LLM for Anthropic's Messages API with
// tool use. It maps ADK/genai contents, function calls, function responses
// and tool declarations to messages, tool_use and tool_result blocks and
// back (extended thinking blocks included, sent back within a tool loop),
// reports the server's token usage including prompt-cache reads and
// writes, and retries through package retry.
//
// It must not hide or invent usage numbers, read credentials from the
// environment, or let an API key reach a log line or an error.
package anthropic
