// Package gemini is Google's Gemini as an ADK model.LLM: ADK's own
// google.golang.org/adk/model/gemini, on the Gemini API with an API key or
// on Vertex AI with a project and location, wrapped in the retry policy,
// per-attempt timeout and secret hygiene that every provider here shares.
//
// It must not change what ADK's Gemini model sends or reports (contents,
// tools, usage pass through as genai defines them; the one addition is a
// configured thinking budget), nor let an API key reach a log line or an
// error.
package gemini
