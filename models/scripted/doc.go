// Package scripted is a model.LLM that answers from a script in the config
// (or the built-in "demo" behaviour), so that agents, tools, guardrails and
// the driver can be exercised end to end without a real model.
//
// It also answers the memory folds of package memory, in every mode, with
// a deterministic summariser (summarise.go), so agents on it — the
// embedded demo among them — build a running memory.
//
// It must not call out to any provider or invent usage numbers: every token
// count it reports comes from the script, or from the demo's and the
// summariser's documented characters/4 estimate.
package scripted
