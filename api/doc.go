// Package api is the operator's HTTP interface to a running worker: agent
// status, operator verbs (pause, resume, interrupt, wake), guardrail
// resets, schedule runs, messages, the Alertmanager webhook receiver,
// Server-Sent Events and a status page. It goes through the driver's own
// methods (via package control for the verbs), so it must not bypass the
// driver's gate, and it holds no agent state of its own beyond a window of
// recently seen message ids.
//
// # Routes and the role each needs
//
// The paths in Options.OpenPaths (by default /healthz, /readyz and
// /metrics) are open: served to anyone, token or not. Every other route
// needs a token whose role the table allows. read, ingest and operate are
// the token roles (RoleRead, RoleIngest, RoleOperate).
//
//	route                                            role                  answer
//	GET  /healthz                                    open, or read|operate always 200 {"status":"ok"}
//	GET  /readyz                                     open, or read|operate 200, or 503 with the reasons
//	GET  /metrics                                    open, or read|operate Options.Metrics (404 when nil)
//	GET  /                                           read|operate          the status page (HTML)
//	GET  /v1/agents                                  read|operate          {"agents": [AgentView...]}
//	GET  /v1/agents/{name}                           read|operate          AgentView
//	GET  /v1/agents/{name}/events                    read|operate          Server-Sent Events of one agent
//	GET  /v1/events                                  read|operate          Server-Sent Events of every agent
//	POST /v1/agents/{name}/messages                  ingest|operate        {"text","wake","id","from","attributes"} → 202
//	POST /v1/alertmanager/{name}                     ingest|operate        Alertmanager webhook v4 → 202
//	POST /v1/agents/{name}/wake                      operate               {"message"} → 200 control.Reply (409 when gated)
//	POST /v1/agents/{name}/pause                     operate               → 200 control.Reply
//	POST /v1/agents/{name}/resume                    operate               {"message"} → 200 control.Reply
//	POST /v1/agents/{name}/interrupt                 operate               {"hold": true} → 200 control.Reply
//	POST /v1/agents/{name}/guardrails/reset          operate               {"guardrail","add_budget_usd"} → 200 guard.ResetResult (409 on re-trip)
//	POST /v1/agents/{name}/schedules/{schedule}/run  operate               → 202 (404 unknown schedule, 409 gated)
//
// read is GET only. ingest may only queue messages, the two POST routes
// marked so, and may not read anything (not even the agent it posts
// to): it is meant for webhooks such as Alertmanager, whose token sits in
// another system's config, so a leak of it can neither pause an agent,
// add budget, nor show the agents' state. operate may do everything. A
// role that does not allow the route is answered 403 with a JSON error
// naming the token, its role, what the role may do and the roles the
// route needs.
//
// # Agent scope
//
// A token with Token.Agents (names, or path.Match globs such as
// "pay-*") is limited to those agents:
//
//   - a request whose path names an agent outside them is answered 403
//     ("token \"am\" may not act on agent \"x\" (its agents: oncall,
//     pay-*)"), before the agent is looked up, so unknown and forbidden
//     agents look alike;
//   - GET /v1/agents, the status page and GET /v1/events show only the
//     agents in scope;
//   - GET /metrics, which covers every agent, is 403 for a scoped token
//     unless it is an open path.
//
// A token without agents, and every request on a server without tokens,
// may act on every agent.
//
// # Token rotation
//
// SetTokens swaps the token set atomically while the server runs. The
// command calls it on SIGHUP (kill -HUP <pid>) through
// worker.ReloadTokens, which re-reads each token's value_file (names,
// roles and agents stay as the config said at start: the config file is
// not re-read) and logs "api tokens reloaded" with their count, or the
// error, never a value. After the swap a removed token gets
// 401, a token present before and after is never refused, and an event
// stream opened with a removed token ends. An empty set is refused
// beyond loopback, as New refuses it. A bad set (a token without a value,
// say a value_file caught half-written) is refused whole and the old set
// stays; write value files by renaming a complete file into place.
//
// # Guarantees
//
//   - Every error is JSON {"error": "..."} with a 4xx or 5xx status, also
//     for unknown routes (404) and wrong methods (405, with Allow).
//   - Authentication comes first: a request without a valid token gets 401
//     whatever its path, except the open paths. Tokens are compared in
//     constant time against every configured token and never logged.
//     Then the route (404/405), then the role (403), then the agent
//     scope (403).
//   - A message or Alertmanager notification whose id was seen for the same
//     agent within DedupWindow is answered 200 {"duplicate": true} and
//     queues nothing, so Alertmanager's retries cause no extra turn.
//   - After Shutdown, writes are refused with 503 and Retry-After, event
//     streams end, and requests already running finish.
//   - Every write is logged (action, agent, token name, status, result,
//     remote), and so is every refused (401, 403) read. Each value a
//     client chose that reaches a log line — path, method, agent name,
//     ids, header values, the remote address, a result quoting any of
//     them — has its control characters escaped (\n, \r, \x00, \x1b)
//     and is cut to 256 bytes, ending in "…", so a request cannot forge
//     log lines or make one of unbounded size.
//
// Not guaranteed: the id window lives in memory, so a retry that arrives
// after a restart is queued again; and it is per worker, not shared across
// replicas.
package api
