package scripted

import "github.com/agent-worker/agent-worker/config"

// Text returns a script step that answers with text s and reports in input
// and out output tokens.
func Text(s string, in, out int) config.ScriptStep {
	return config.ScriptStep{Text: s, Usage: config.Usage{Input: in, Output: out}}
}

// CallStep returns a script step that calls the function name with args and
// reports in input and out output tokens.
func CallStep(name string, args map[string]any, in, out int) config.ScriptStep {
	return config.ScriptStep{
		Call:  &config.Call{Name: name, Args: args},
		Usage: config.Usage{Input: in, Output: out},
	}
}
