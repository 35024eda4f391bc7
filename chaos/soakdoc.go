package main

import "strings"

// The soak's section of the reliability report lies between these
// markers, each store's last block within it between its own: the chaos
// scenarios rewrite the file around the section, and a soak rewrites its
// store's block and the section's introduction only.
const (
	soakBegin = "<!-- soak:begin -->"
	soakEnd   = "<!-- soak:end -->"
)

func storeBegin(store string) string { return "<!-- soak:" + store + ":begin -->" }
func storeEnd(store string) string   { return "<!-- soak:" + store + ":end -->" }

// soakIntro says what the soak does and how to run it.
const soakIntro = `## Soak

` + "`make soak`" + ` (the ` + "`-soak`" + ` mode of the program in [` + "`chaos/`" + `](../chaos); CI and ` + "`make test`" + ` do not run it) runs three agent-worker replicas (lease ttl 3 s, heartbeat 1 s) on an external nats-server for ` + "`SOAK_DURATION`" + ` (default 10m), their state in Redis or in JetStream KV (` + "`SOAK_STORE=redis|kv`" + `, default redis). Twelve agents (a01–a12), their model a fake OpenAI-compatible provider over HTTP priced at $2 and $8 per million input and output tokens (every turn: a publish tool call, then a text after 250 ms), get about 20 messages a second through JetStream, each with its id as ` + "`Nats-Msg-Id`" + ` and in the body: to their inboxes, to their deferred subjects, and on ` + "`soak.shared.load`" + `, which a11 and a12 both bind (` + "`soak.shared.>`" + `, mode inbox), so each message there is owed to both. The agents coalesce a second of wakes into one turn and have their turn rate limits lifted; memory folds are off.

After every 20–40 s of calm a fault drawn from a seeded generator strikes: kill -9 of a replica or SIGTERM (restarted after 1–5 s), kill -9 of the nats-server (restarted on the same port and store directory after 1–3 s), Redis stopped for 5–15 s (redis store only), the provider answering 429 or 500 to every request for 10–30 s, an agent paused for 5–15 s and resumed over the API, a burst of 500 messages to one agent, a replica frozen with SIGSTOP for 10–30 s (then SIGCONT), or a replica held to 3 % of a core for 30–60 s (moved into a cgroup with that CPU quota, then out: it needs root and a cgroup cpu controller; its agents want about a tenth of a core). The seed is printed and reported; ` + "`SOAK_SEED`" + ` repeats the faults, not their timing. Then the faults and the load stop, and the harness waits up to 3 minutes for the rest, sending every 10 s an inbox message to each agent still owed one, so that its deferred messages get a turn.

Every delivery (one message for one agent) is accounted from the workers' JSON logs, as in the table above but per (agent, id): handled exactly once, dead-lettered, or lost. Every 2 s the harness asks each replica which agents it holds (its own entry of ` + "`GET /v1/replicas`" + `): two replicas holding one agent, again when asked 100 ms later, is a violation; seen once only, an overlap (the answers straddled a handover). Spend is reconciled: the agents' session spend in the store (` + "`guardrails.session.spent_usd`" + ` of ` + "`GET /v1/agents`" + `: what the budgets bind on, written with every charge and restored by the next owner, so it survives kill -9 short of a charge not yet stored) against the provider's answers written whole × price; beside it the cost counters (` + "`agent_worker_model_cost_usd_total`" + `) as last scraped in each process's life, which miss what a killed process spent after its last scrape. Resident memory (VmRSS) and goroutines (` + "`go_goroutines`" + `) of each replica: at its first sample, the most, and after the drain. In the faults' table, recovery runs from the kill, SIGTERM, SIGSTOP or CPU quota of a replica to the first completed turn of an agent it held; from the restart of nats-server or redis-server, or the provider's last refusal, to the first completed turn of any agent; from a resume to the agent's first turn; and for a burst from its first publish until all of it was handled. Its spend gap is how the difference between the stored spend and the provider's bill changed from just before the fault to just before the next one (or the end): the share of the difference made while that fault struck and its effects lasted (a turn caught between its answer and its charge by a snapshot shows as a few ten-thousandths of a dollar). Reported but not failed on: turn numbers of one agent that two completed turns logged (an owner going on from a stale count), and unfinished turns abandoned after waiting for their messages to come again (with how many of them a completed turn had already ended). A lost delivery is listed with what the logs say of it (acked as handled by a recorded turn, and how that turn ended; dropped). The soak fails (and exits non-zero) on any delivery lost, handled twice, dead-lettered or handled by an agent it was not for, on two owners at once, on a replica still running 15 s after SIGTERM, or when it could not be run to its end.

Run it with ` + "`make soak`" + `, adding ` + "`SOAK_STORE=kv`, `SOAK_SEED=…`, `SOAK_DURATION=2m`" + ` as needed. A run replaces its store's block below and keeps the other store's.
`

// soakSection returns doc's soak section, markers included; "" if it has
// none.
func soakSection(doc string) string { return between(doc, soakBegin, soakEnd) }

// between returns the first part of doc from begin through the end
// after it, markers included; "" if either is missing.
func between(doc, begin, end string) string {
	i := strings.Index(doc, begin)
	if i < 0 {
		return ""
	}
	j := strings.Index(doc[i:], end)
	if j < 0 {
		return ""
	}
	return doc[i : i+j+len(end)]
}

// withSoak returns the chaos scenarios' report with the soak section of
// old, the file it replaces, kept at its end.
func withSoak(report, old string) string {
	sec := soakSection(old)
	if sec == "" {
		return report
	}
	return strings.TrimRight(report, "\n") + "\n\n" + sec + "\n"
}

// spliceSoak returns doc with store's block of the soak section replaced
// by block (a soakResult's markdown), the other store's block kept, and
// the rest of doc as it was. A doc without a soak section gets one at its
// end.
func spliceSoak(doc, store, block string) string {
	old := soakSection(doc)
	var b strings.Builder
	b.WriteString(soakBegin + "\n" + soakIntro)
	for _, st := range []string{storeRedis, storeKV} {
		blk := between(old, storeBegin(st), storeEnd(st))
		if st == store {
			blk = storeBegin(st) + "\n" + strings.TrimRight(block, "\n") + "\n" + storeEnd(st)
		}
		if blk != "" {
			b.WriteString("\n" + blk + "\n")
		}
	}
	b.WriteString(soakEnd)
	if old != "" {
		return strings.Replace(doc, old, b.String(), 1)
	}
	if strings.TrimSpace(doc) == "" {
		return b.String() + "\n"
	}
	return strings.TrimRight(doc, "\n") + "\n\n" + b.String() + "\n"
}
