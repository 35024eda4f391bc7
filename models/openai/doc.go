// Package openai is an ADK model.LLM for the OpenAI Chat Completions API
// with tool calling, and so for any server that speaks it (OpenAI, Ollama,
// vLLM, llama.cpp server, LiteLLM). It maps ADK/genai contents, function
// calls, function responses and tool declarations to chat messages and
// back, sends a reasoning effort when configured, reports the server's
// token usage, and retries through package retry.
//
// It must not hide or invent usage numbers, read credentials from the
// environment, or let an API key reach a log line or an error.
package openai
