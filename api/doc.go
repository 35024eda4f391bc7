// Package api is the operator's HTTP interface to a running worker: agent
// status, operator verbs (pause, resume, interrupt, wake), guardrail
// resets, schedule runs, messages, the Alertmanager webhook receiver,
// Server-Sent Events and a status page. It goes through the driver's own
// methods (via package control for the verbs), so it must not bypass the
// driver's gate, and it holds no agent state of its own beyond a window of
// recently seen message ids.
//
// # Routes
//
//	GET  /healthz                                    always 200 {"status":"ok"}
//	GET  /readyz                                     200, or 503 with the reasons
//	GET  /metrics                                    Options.Metrics (404 when nil)
//	GET  /                                           the status page (HTML)
//	GET  /v1/agents                                  {"agents": [AgentView...]}
//	GET  /v1/agents/{name}                           AgentView
//	GET  /v1/agents/{name}/events                    Server-Sent Events of one agent
//	GET  /v1/events                                  Server-Sent Events of every agent
//	POST /v1/agents/{name}/messages                  {"text","wake","id","from","attributes"} → 202
//	POST /v1/agents/{name}/wake                      {"message"} → 200 control.Reply (409 when gated)
//	POST /v1/agents/{name}/pause                     → 200 control.Reply
//	POST /v1/agents/{name}/resume                    {"message"} → 200 control.Reply
//	POST /v1/agents/{name}/interrupt                 {"hold": true} → 200 control.Reply
//	POST /v1/agents/{name}/guardrails/reset          {"guardrail","add_budget_usd"} → 200 guard.ResetResult (409 on re-trip)
//	POST /v1/agents/{name}/schedules/{schedule}/run  → 202 (404 unknown schedule, 409 gated)
//	POST /v1/alertmanager/{name}                     Alertmanager webhook v4 → 202
//
// # Guarantees
//
//   - Every error is JSON {"error": "..."} with a 4xx or 5xx status, also
//     for unknown routes (404) and wrong methods (405, with Allow).
//   - Authentication comes first: a request without a valid token gets 401
//     whatever its path, except the open paths. Tokens are compared in
//     constant time against every configured token and never logged.
//   - A message or Alertmanager notification whose id was seen for the same
//     agent within DedupWindow is answered 200 {"duplicate": true} and
//     queues nothing, so Alertmanager's retries cause no extra turn.
//   - After Shutdown, writes are refused with 503 and Retry-After, event
//     streams end, and requests already running finish.
//
// Not guaranteed: the id window lives in memory, so a retry that arrives
// after a restart is queued again; and it is per worker, not shared across
// replicas.
package api
