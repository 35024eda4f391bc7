package distributed

import "github.com/agent-worker/agent-worker/background"

// PublishReport publishes a subagent report of parent's subagent id as
// the distributed mode d does when the subagent finishes.
func PublishReport(d background.Distributed, parent, id, text string) bool {
	return d.(*queue).publishReport(parent, id, text, "", nil)
}
