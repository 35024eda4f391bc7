// Package distributed is background's distributed mode: subagents run as
// jobs on a JetStream work queue that every replica shares, so a
// subagent runs on whichever replica has room, and its reports, charges
// and stops cross replicas over NATS. It owns the queue, the parents'
// registries in the store and the protocol below; it must not run a
// subagent itself (the background.Manager does, through background.Host)
// nor charge a parent anywhere but on the parent's owner.
//
// New returns the constructor to set as background.Options.Distributed.
//
// # Protocol
//
// Spawn, on the parent's owner, publishes a job to the work-queue stream
// (Options.Stream, subject <prefix>._subagents.jobs, Nats-Msg-Id the
// subagent's id); every replica with room (Options.MaxPerReplica) pulls
// jobs from one durable consumer they share and runs them. While it runs
// a subagent:
//
//   - the running replica sends in-progress acks every AckWait/3, and acks
//     the job only once its report is published;
//   - before each model call it reads the parent's registry (a stop asked
//     for) and asks the parent's owner on <prefix>._subagents.admit.<parent>
//     (request/reply; only the owner answers, with its guardrails' Admit),
//     waiting while no owner answers (a lease moving), so no model call
//     is made without the owner's admission;
//   - after each model response it publishes a charge record to
//     <prefix>._subagents.charges.<parent> (same stream; Nats-Msg-Id
//     "charge-<id>-<run>-<call>") and waits for JetStream's ack;
//   - the owner halting the parent (a guardrail trip) publishes a notice
//     on <prefix>._subagents.notice.<parent>; stop_subagent and the API's
//     stop record the stop in the registry and publish one too; the
//     running replica cancels the subagent at once (its model call too),
//     reporting "stopped: parent halted" or "stopped by ...";
//   - the report is published to the parent's inbox subject with
//     Nats-Msg-Id = natsbus.MsgID(parent, the subagent's id) and the
//     subagent's id in its envelope, and the header Agent-Worker-Via:
//     subagent, so it is durable, deduplicated, and reaches whichever
//     replica owns the parent then, which wakes it with source subagent.
//
// Every message of this protocol — jobs, charge records, notices,
// admissions, reports — carries the deployment's seal (Options.Seal,
// package seal) over its subject, Nats-Msg-Id and body, and one without
// it is refused and logged: the subjects are NATS subjects a stranger may
// reach, and a forged job would spend money, a forged charge move a
// parent's spend, a forged report wake the parent as a subagent. A charge
// record's cost is never negative.
//
// The parent's owner (the replica holding its lease, once its guardrails
// are restored: the Manager's Guard's Restore) consumes the parent's
// charge records from a durable consumer of its own and applies each
// through background.Charger.Charge once: the record's key (subagent id,
// run, call number) is claimed in the store (set-if-absent, kept 7 days)
// before it is charged, so a redelivered or republished record is acked
// without a second charge. The registry (store key subagents.<parent>)
// lists each subagent's state, replica, start and spend for List and
// Running, from every replica.
//
// # Guarantees
//
// A spawned subagent is never silently lost. If the replica running it
// dies, its job is delivered again once the stream's ack wait passes
// (Options.AckWait; nats.ack_wait) and run again from the start by a
// replica with room; after MaxRuns starts it is not run again but
// reported failed to its parent. A replica that shuts down hands its
// unfinished jobs back (nak) for another to run at once. Each charge
// record reaches the parent's ledger once. A parent's halt stops its
// subagents on every replica within a NATS round trip (the notice), or at
// their next model call if the notice was missed. The parent gets one
// report per subagent: its Nats-Msg-Id is derived from the subagent's id,
// and a job delivered again after its report was recorded is acked, not
// run.
//
// Not guaranteed: a subagent run again starts over: what its earlier run
// did and spent stays done and charged (its budget counts every run; its
// timeout is per run). The parent's cap (background.Spec.Max) is checked by its
// owner; while its lease moves, two replicas could each admit one. A
// report is cut to fit nats.max_message_bytes. A charge that cannot be
// published for 30 seconds (NATS down) fails the subagent and is logged,
// not charged; an owner that dies between claiming a charge's key and
// charging it loses that one charge. A replica that dies between
// publishing a report and recording it leaves the job to be run again;
// that run's report is dropped as a duplicate if it comes within the
// inbox stream's duplicate window (nats.duplicate_window) or after the
// parent handled the first, and queued a second time otherwise. A
// replica that died with a job leaves it shown running on that replica
// until it is delivered again. A job no replica takes within the stream's
// max age (7 days) is dropped by the stream and stays listed queued.
package distributed
