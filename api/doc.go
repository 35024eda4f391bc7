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
//	GET  /                                           read|operate          the status page (HTML); a browser without a session: the login form (401)
//	POST /login                                      none (it logs in)     form field "token" → 303 to / with the session cookie; the form with 401/403 (see Browser sessions)
//	POST /logout                                     none                  → 303 to /, the session cookie cleared
//	GET  /status.js                                  read|operate          the status page's script (its verb buttons)
//	GET  /v1/replicas                                read|operate          ReplicaList: live replicas and the agents each owns
//	POST /v1/reload                                  operate (unscoped)    no body (or {}): re-read the config file and apply it → 200 ReloadReport; 422 invalid, 409 needs a restart (problems: file:line each)
//	GET  /v1/agents                                  read|operate          {"agents": [AgentView...]} (owners' views)
//	GET  /v1/agents/{name}                           read|operate          AgentView (the owner's; 503 no owner)
//	GET  /v1/agents/{name}/events                    read|operate          Server-Sent Events of one agent
//	GET  /v1/events                                  read|operate          Server-Sent Events of every agent
//	POST /v1/agents/{name}/messages                  ingest|operate        {"text","wake","id","from","attributes"} → 202 (200 duplicate; 400 an id in a reserved namespace)
//	POST /v1/alertmanager/{name}                     ingest|operate        Alertmanager webhook v4 → 202 (200 duplicate)
//	POST /v1/webhooks/{name}                         ingest|operate        a configured webhook's JSON body → 202 (200 duplicate, 404 unknown or outside the token's agents, 422 template failed)
//	GET  /v1/agents/{name}/inbox                     read|operate          control.Inbox: the owner's queued messages (no text)
//	POST /v1/agents/{name}/wake                      operate               {"message","reason"} → 200 control.Reply (409 when gated)
//	POST /v1/agents/{name}/pause                     operate               {"reason"} → 200 control.Reply
//	POST /v1/agents/{name}/resume                    operate               {"message","drop_queued","reason"} → 200 control.Reply ("dropped"; 409 not paused, with "state", or halted)
//	POST /v1/agents/{name}/interrupt                 operate               {"hold": true, "reason"} → 200 control.Reply
//	POST /v1/agents/{name}/guardrails/reset          operate               {"guardrail","add_budget_usd","reason"} → 200 guard.ResetResult (409 on re-trip; 400 above guard.MaxAddBudgetUSD or a ceiling above guard.MaxCeilingUSD)
//	POST /v1/agents/{name}/schedules/{schedule}/run  operate               → 202 control.ScheduleRun (404 unknown schedule, 409 gated)
//	GET  /v1/agents/{name}/subagents                 read|operate          SubagentList: every subagent, on any replica
//	POST /v1/agents/{name}/subagents/{id}/stop       operate               → 202 {"id","status":"stopping"} (404 unknown, 409 finished)
//	GET  /v1/agents/{name}/turns?limit=N             read|operate          TurnList: the newest turns, completed or failed (limit 1..64, default 10; 400 otherwise)
//	GET  /v1/agents/{name}/messages/{id}             read|operate          MessageInfo: queued, running, handled (turn, text) or dead_lettered (reason); 404 unknown
//	GET  /v1/agents/{name}/memory                    read|operate          driver.MemoryView: the owner's running memory
//	POST /v1/agents/{name}/memory/compact            operate               {"reason"} → 202 driver.MemoryView (fold queued; 409 memory off or halted)
//	DELETE /v1/agents/{name}/memory                  operate               {"reason"} → 200 driver.MemoryView (cleared; event memory-cleared)
//	GET  /v1/agents/{name}/dlq?limit=N               read|operate          DeadLetterList: kept dead letters, oldest first (limit 1..1000, default 50); 404 without JetStream
//	POST /v1/agents/{name}/dlq/{seq}/replay          operate               {"reason"} → 200: back to the inbox once, removed from the stream; 404 not kept
//	GET  /v1/agents/{name}/approvals                 read|operate          []approval.Request: the owner's pending approvals
//	POST /v1/agents/{name}/approvals/{id}/approve    operate               {"reason"} → 202 {decision, request}: the held call runs, the agent wakes with its result; 404 not pending
//	POST /v1/agents/{name}/approvals/{id}/deny       operate               {"reason"} → 200 {decision, request}: the agent is told; 404 not pending
//	POST /v1/agents/{name}/model                     operate               {"model" | null,"reasoning_effort","reason"} → 200 driver.ModelView (400 bad body, 422 unknown model or effort, 503 not stored)
//	POST /v1/agents/{name}/ask                       operate               {"question"} → 200 control.AskAnswer: one model call on the owner, nothing written (409 halted or a ceiling: the guardrail; 504 no answer in time)
//
// Every verb and view above may also answer 503 {"error": "no replica
// owns agent x right now (...)"} (see Replicas below).
//
// Audit: the verbs and the reset are carried out on behalf of the token's
// name (the caller; "anonymous" on a server without tokens), which the
// owner's events name as "by", with the optional "reason" (at most
// control.MaxReason runes, else 400) — also when another replica
// forwarded the request. A pause keeps both with its time, so views show
// paused_since, paused_by and pause_reason, also after a restart.
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
// # Browser sessions
//
// A browser cannot send a bearer token, so with tokens configured the
// status page offers a login: GET / from a browser (Accept: text/html)
// without a valid session answers 401 with a form that takes a token's
// value (a password field; the answer never echoes it). POST /login with
// a read or operate token sets the session cookie (SessionCookie) and
// redirects (303) to the page; a wrong token gets the form again with 401,
// an ingest token (it cannot read) 403, a post whose Origin or Referer
// names another host 403; each refusal is logged ("api login ...") and
// counted by the Observer like any 401/403. POST /logout clears the
// cookie. A server without tokens has no login (POST /login is 404) and
// serves the page to everyone, as before.
//
// The cookie is HttpOnly, SameSite=Strict, Path=/, Max-Age
// SessionLifetime (12h; no renewal), and Secure when the request came
// over TLS or through a proxy that says so (X-Forwarded-Proto: https; the
// API has no TLS settings of its own). It never holds the token: it holds
// the token's name, an expiry and an HMAC-SHA256 over both, keyed by a key
// derived from the token's value (access.Set.Session). A request with the
// cookie and no Authorization header is checked by looking the token up
// by name in the set in force and recomputing the HMAC (constant-time
// compare), then the expiry (access.Set.Resume). So:
//
//   - any replica holding the same tokens verifies any replica's session;
//     nothing is stored or shared;
//   - rotating a token's value (SIGHUP) or removing the token ends its
//     sessions at once (401: the form says the session is no longer
//     valid, and the cookie is cleared); a token kept with the same value
//     keeps them;
//   - the session is the token's caller now: its current role and agents,
//     exactly as the bearer token would be — a read session sees the page
//     without verb buttons and its verbs are 403, a scoped session sees
//     and acts on its agents only; the write log and the audit ("by")
//     name the token.
//
// Not guaranteed: a session cannot be revoked on its own. A logout clears
// the browser's cookie, but a copy taken before stays valid until it
// expires or its token's value is rotated.
//
// Forgery: a write (any method but GET, HEAD, OPTIONS) authenticated by
// the cookie also needs CSRFHeader holding the session's anti-forgery
// token (an HMAC of the session keyed like it, embedded in the page as a
// meta element "csrf-token" and sent by its script), and, when the
// browser sends Origin (or else Referer), that it names this server's
// host; otherwise it is answered 403 JSON and logged ("api session write
// refused"), before the route is looked at. SameSite=Strict already keeps
// other sites' pages from sending the cookie; the token guards against
// what that misses (a sibling subdomain, an old browser). A request with
// an Authorization header is authenticated by it alone, cookie or not,
// and needs no CSRF token.
//
// # Without tokens: this machine's requests only
//
// A server without tokens (loopback only: New and Serve refuse anything
// else) lets every request in as "anonymous", so it serves only what this
// machine's own clients send (local.go): a page of another site, open in
// a browser here, can reach 127.0.0.1 too.
//
//   - A request whose Host is not a loopback name or address (localhost,
//     127.0.0.0/8, ::1, any port) nor the listen address is answered 421
//     Misdirected Request, JSON, on every path, open ones included: a
//     DNS-rebinding page addresses the server under its own name.
//   - A write (any method but GET, HEAD, OPTIONS) is answered 403 JSON
//     when the browser says it comes from another page: an Origin whose
//     host is not loopback (or "null"), or a Sec-Fetch-Site other than
//     same-origin and none. same-site is refused too: a page on another
//     port of localhost is another program's.
//
// Both come before anything else, are logged ("api request refused: not
// from this machine") and change nothing. The CLI, curl and scripts send
// neither header and are served as before; so is the status page (same
// origin). With tokens, neither check applies: a page cannot send a
// bearer token, and a session's writes need their CSRF token.
//
// # Request bodies
//
// Every write but POST /login and /logout (which take the login form)
// takes JSON or nothing: a Content-Type, when sent, must be
// application/json (charset allowed), and a body needs one; otherwise
// the answer is 415 JSON before the route does anything — POST
// /v1/reload too, which reads no body. A write with neither body nor
// Content-Type is served: the routes whose body is optional take it as
// {} ({"reason"} and the like), the others answer 400. So no form and no
// text/plain post, which another site's page may send without asking,
// reaches a handler, with tokens or without.
//
// # Failed authentication
//
// A credential that does not verify — a bearer token, an Authorization
// header of another scheme, a session cookie, the login form's token —
// is a failed authentication (throttle.go). It is answered 401 as
// before, reported to the Observer (AuthFailure, by route pattern: POST
// /login for the form) and counted against the client's address: the
// connection's IP (an IPv6 one by its /64), never X-Forwarded-For. From
// the AuthFailureLimit'th (10th) failure within AuthFailureWindow (one
// minute, from the client's first failure) to the end of that window,
// every request of that address that needs authentication is answered
// 429 with Retry-After (the seconds left) and a JSON error — the login
// form, for a browser posting it or asking for the page — without its
// credential being looked at; then the right token gets in again. The
// open paths stay open. A request without any credential is answered
// 401 and not counted (it guesses nothing, and browsers ask for
// /favicon.ico without one), nor is a throttled one.
//
// Logging is per client, not per request: a client's first refusal of
// each kind (a failed credential, none, throttled) has its own WARN line
// at once ("api request with an invalid token", "api request without a
// token", "api request with an invalid session", "api login with an
// invalid token", "api client throttled after failed authentications");
// those after it are counted and logged together, one WARN line a minute
// while they go on ("api authentication refused": failures,
// without_credential, throttled, over, last_path). A minute without
// refusals ends the client's lines. The throttle remembers at most 4096
// addresses, each until its window is over and its lines written; beyond
// that, the one refused longest ago is forgotten.
//
// Not guaranteed: clients behind one proxy share its address, so one of
// them guessing throttles them all for the rest of the window; a sender
// with more than 4096 addresses can make the throttle forget one.
//
// # Agent scope
//
// A token with Token.Agents (names, or path.Match globs such as
// "pay-*") is limited to those agents:
//
//   - a request whose path names an agent outside them is answered 403
//     ("token \"am\" may not act on agent \"x\" (its agents: oncall,
//     pay-*)"), before the agent is looked up, so unknown and forbidden
//     agents look alike; a webhook whose agent is outside them is
//     answered as an unknown webhook (404), so unknown and forbidden
//     webhooks look alike;
//   - GET /v1/agents, the status page and GET /v1/events show only the
//     agents in scope;
//   - GET /metrics, which covers every agent, is 403 for a scoped token
//     unless it is an open path.
//
// A token without agents, and every request on a server without tokens,
// may act on every agent.
//
// # Replicas: one owner, one truth
//
// Several replicas may serve the same agents; each agent has one owner at
// a time (its lease). Whichever replica a request reaches:
//
//   - The verbs (wake, pause, resume, interrupt, guardrail reset, schedule
//     run) are carried out by the agent's owner and answered with the
//     owner's result (Options.Control: control.Control.Do, which applies
//     the verb here when this replica owns the agent and otherwise
//     forwards it on the agent's NATS control subject, where only the
//     owner answers). A refused reset's 409 carries the owner's numbers.
//   - The views (GET /v1/agents, GET /v1/agents/{name}, the status page,
//     and so `agent-worker status`) are the owner's: identical from every
//     replica but for "served_by", the replica that answered; "owner"
//     names the owner. subagents_running counts the owner's subagents.
//   - When no owner answers within the control timeout (2s by default) —
//     its owner died and the lease has not moved yet — verbs and GET
//     /v1/agents/{name} answer 503 {"error": "no replica owns agent x
//     right now (...)"} with Retry-After, and do nothing; a list shows the
//     agent with state "unknown" and the reason in "error". Never a
//     standby's state, never a success nothing backs.
//   - When this replica cannot tell who owns the agent — its NATS
//     connection is down (reconnecting), or its own lease on the agent has
//     gone unconfirmed for TTL - renew interval (control.Doubter) — they
//     answer at once, the same way, with "owner of agent x unknown right
//     now: NATS reconnecting: ...; retry": never a guessed owner, never
//     counts that may be stale. An unknown agent's list entry carries only
//     name, state, error, served_by, model and schedule names.
//
// Messages need no owner: they are published to the agent's durable NATS
// subject (Options.Deliver), which its owner consumes. Event streams read
// Options.EventFeed: in the worker with JetStream, the durable events
// stream, so every replica streams every agent's events with ids shared by
// the replicas and kept across restarts; without one, this replica's ring.
//
// Every message the API queues — POST messages, the Alertmanager
// receiver, a webhook — carries its authenticated sender
// (inbox.Message.Sender): "api, token <name>" from the credential that
// let the request in (a bearer token or a session signed with one), or
// SenderUnauthenticated on a server without tokens; never the body's
// "from", which stays the sender's untrusted claim. The worker's Deliver
// seals it onto the NATS message (natsinbox.HeaderSender), so the owner
// that reads it back from the stream can tell it from a publisher's.
//
// # Queueing: answers and duplicates
//
// A message or notification queued is answered 202
//
//	{"status":"queued","queued":true,"id":"...","duplicate":false,"kind":"inbox"}
//
// (kind "deferred" when it waits for the next turn; an Alertmanager
// notification cut to fit adds "truncated": N). Nothing is queued, and the
// answer is 200
//
//	{"status":"duplicate","queued":false,"id":"...","duplicate":true,"reason":"handled","detail":"..."}
//
// when the id is already known to one of these, checked in this order before
// anything is published, so a message that would be dropped is never
// answered 202:
//
//   - "dedup_window": the id was queued for the same agent within
//     DedupWindow (this process's memory);
//   - "stream": the transport already holds a message with this id
//     (Options.Deliver returned ErrDuplicate: JetStream's duplicate
//     window; the input log keeps a message with an id that long after
//     it was handled, so this outlives a restart).
//
// A message that cannot be queued (503) leaves no trace, so its retry is
// not taken for a duplicate. A message is at most MaxMessageBytes once
// encoded (EncodeMessage; nats.max_message_bytes): a larger one is
// answered 413.
//
// Ids are namespaced by the route they came in by (idspace.go): a
// webhook's begin "webhook:<name>:", the Alertmanager receiver's
// "alertmanager:". POST /v1/agents/{name}/messages answers 400, naming
// the reserved prefix, for an "id" that begins with either (in any case,
// after trimming), so a message cannot take the id of a notification
// still to come and have it dropped as a duplicate.
//
// # The Alertmanager receiver
//
// POST /v1/alertmanager/{name} takes one webhook notification (version 4)
// of up to AlertmanagerMaxBytes (api.alertmanager_max_bytes, default 4
// MiB; 413 beyond: Alertmanager never retries a 4xx, so the limit is
// generous) and queues it as one message, rendered compactly by
// inbox.ParseAlertmanager:
//
//   - Size: the message must fit MaxMessageBytes. When not every alert
//     fits, the most severe are kept (severity label critical, error,
//     warning, info, then anything else or none), then the newest
//     (startsAt), then firing before resolved; the text ends with
//     "(N more alerts not shown: critical 2, warning 5; firing 6,
//     resolved 1)", the message gets the attribute truncated=N and the
//     answer "truncated": N. The header always counts every alert.
//   - Id: derived from the group key, the status and each alert's
//     fingerprint (or labels), status and startsAt. A retry or a repeat
//     (repeat_interval) of the same alerts in the same state is a
//     duplicate; an alert that resolved and fired again (a new startsAt),
//     an alert added, removed or changing status make a new id. A group
//     that returns to a state it had before but not last (firing →
//     resolved → firing with the same startsAt) is new too, under an id
//     derived from both: the receiver remembers each group's last
//     notification for DefaultGroupMemory.
//   - Wake: a notification with a firing alert wakes the agent, with
//     wake source "alertmanager" (inbox.Message.Via; the worker publishes
//     it with the Agent-Worker-Via header, sealed with the deployment's
//     key, so that a NATS publisher cannot claim it); an
//     all-resolved one is deferred to the next turn unless ResolvedWakes
//     is set or WakeOnResolved names the agent
//     (agents[].wake_on_resolved; SetWebhooks replaces the table).
//   - Attributes: via=alertmanager, receiver, group_key, status, alertname
//     when all alerts share one, truncated when alerts were left out.
//   - Observer: each request naming a configured agent is counted
//     accepted (202), duplicate (200) or rejected (4xx: bad payload, too
//     large, unauthorized, forbidden); truncated counts accepted ones cut
//     to fit, in addition to accepted. 5xx answers (shutdown, NATS down)
//     are retried by Alertmanager and not counted there.
//
// # Generic webhooks
//
// POST /v1/webhooks/{name} serves the webhooks of Options.Webhooks
// (config webhooks.<name>; webhooks.go), replaced whole by SetWebhooks on
// a config reload (webhooks_swap.go: a request in flight keeps the table
// it started with): anything that POSTs JSON — a CI
// system, Grafana, a custom watcher — queues one message for the
// webhook's agent. The route needs ingest or operate, and the token's
// agent scope applies to the webhook's agent: outside it the answer is
// the 404 of an unknown webhook, word for word, so a scoped token cannot
// tell which webhook names exist (the write log says why). The body is bounded as an Alertmanager payload's
// (AlertmanagerMaxBytes, the in-flight budget), the message as every
// message's (MaxMessageBytes: a notification keeps the alerts that fit,
// a templated text is cut with a last line saying so, "truncated_bytes"
// in the answer; 413 only when nothing fits). A body that is not JSON,
// or not the format's payload, is 400; a template that fails on the
// body is 422 with text/template's reason. The id is the id template's
// output or, without one, a hash of the body (json) or the Alertmanager
// receiver's notification id (grafana, alertmanager), prefixed
// "webhook:<name>:", with the duplicate rules above. The message goes
// through Options.Deliver as every message, source "webhook", wake
// source inbox (mode inbox) or none (mode deferred; an all-resolved
// notification as at the receiver). The Observer's WebhookNotification
// is told each outcome of a configured webhook, 422 as template_error.
//
// # Token rotation
//
// SetTokens swaps the token set atomically while the server runs. A
// config reload (SIGHUP, kill -HUP <pid>, or POST /v1/reload: reload.go)
// calls it through the worker with the tokens of the file re-read — their
// names, roles and agents as the file says now, each value read again
// from its value_file or value_env — and the command logs "api tokens
// reloaded" with their count, or the problems, never a value. After the swap a removed token gets
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
//   - Without tokens, locality comes first: a Host that is not this
//     machine is 421, a cross-site write 403 (see Without tokens).
//   - Authentication comes next: a request without a valid token (or,
//     without an Authorization header, a valid session cookie, and for a
//     write its CSRF token: else 403) gets 401 whatever its path, except
//     the open paths and POST /login and /logout; a client with too many
//     failures gets 429 (see Failed authentication). Tokens are compared
//     in constant time against every configured token and never logged.
//     Then the route (404/405), then the role (403), then a write's
//     Content-Type (415, see Request bodies), then the agent scope
//     (403).
//   - A message or Alertmanager notification whose id was seen for the same
//     agent within DedupWindow, or was already handled by a turn, is
//     answered 200 {"status":"duplicate"} and queues nothing, so
//     Alertmanager's retries and repeats cause no extra turn, also after
//     a restart.
//   - Every answer is reported to the Observer (route pattern or
//     RouteOther, status, duration), and so is every failed
//     authentication (route pattern or RouteOther), so route labels stay
//     bounded.
//   - After Shutdown, writes are refused with 503 and Retry-After, event
//     streams end, and requests already running finish.
//   - The bodies in flight are bounded together by MaxInflightBytes
//     (api.max_inflight_bytes, default 16 MiB): once the request has
//     passed authentication, role and agent scope, and before its body is
//     read, it reserves its Content-Length (its route's limit when chunked)
//     until it is answered, and is answered 503 with Retry-After at once
//     when that does not fit — never queued, so many large senders cannot
//     take the worker's memory, and a caller without a valid token spends
//     none of it. Not guaranteed: the bound is on body bytes; what a
//     handler builds from a body (a decoded notification) is a multiple of
//     it, about ten times for a large Alertmanager payload.
//   - Every write is logged (action, agent, token name, status, result,
//     remote), and so is every refused (401, 403) read. Each value a
//     client chose that reaches a log line — path, method, agent name,
//     ids, header values, the remote address, a result quoting any of
//     them — has its control characters escaped (\n, \r, \x00, \x1b)
//     and is cut to 256 bytes, ending in "…", so a request cannot forge
//     log lines or make one of unbounded size.
//
// Not guaranteed: the id window and the groups' last notifications live
// in memory, per worker. Across a restart or replicas, the stream's
// duplicate window (nats.duplicate_window) still catches a repeat; but a
// group returning to an earlier state with the same
// startsAt right after a restart is taken for a duplicate of that earlier
// notification; and an older state arriving after a newer one (an
// Alertmanager HA peer that lagged) is taken for such a return, and
// queued. A repeat later than both windows (Alertmanager's
// repeat_interval, 4h by default) is queued again: the agent hears that
// the alert still fires.
package api
