package worker

import (
	"context"
	"strings"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/mcptools"
)

// A reload applies mcp_servers in three steps (mcptools.Plan):
//
//   - planMCP, before anything changes: the new connections are prepared
//     (headers and inherited variables read); a server that cannot be
//     prepared refuses the reload whole, nothing changed.
//   - connectMCP, before the agents change: added servers and the new
//     connections of changed ones are started and put in place by name,
//     so an added or changed agent's next turn finds them up. An
//     unchanged agent granted a changed server keeps its tool set, which
//     follows the server by name.
//   - Plan.Retire, after the agents changed: removed servers are
//     disconnected once their running calls end. Config validation makes
//     every agent granted a removed server change in the same reload
//     (its grant names a server that no longer exists otherwise).
//
// The tool labels of tool_calls_total follow in relabel: a changed
// tool_prefix renames an unchanged agent's tools too.

// planMCP prepares the reload of the MCP servers, or says why it cannot
// (each problem "mcp_servers.<name>: ...").
func (w *Worker) planMCP(next *config.Config) (*mcptools.Plan, *ReloadRefusal) {
	plan, err := w.mcp.Plan(next.MCPServers)
	if err != nil {
		return nil, &ReloadRefusal{Err: ErrConfigInvalid, Problems: strings.Split(err.Error(), "\n")}
	}
	return plan, nil
}

// connectMCP starts the plan's new connections and puts them in place;
// a server not up by then is logged (by mcptools) and keeps connecting
// in the background, its tools answering "server unavailable" meanwhile,
// as at start.
func (w *Worker) connectMCP(ctx context.Context, plan *mcptools.Plan) {
	if plan.Empty() {
		return
	}
	late := plan.Connect(ctx)
	w.log.Info("MCP servers reloaded", "added", plan.Added, "removed", plan.Removed, "changed", plan.Changed, "not_up_yet", late)
}
