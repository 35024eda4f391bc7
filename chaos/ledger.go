package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"time"
)

// The log messages the ledger reads; they are the worker's contract for
// where a message ended up.
const (
	msgWorkerStarted = "worker started"
	msgTurnStarted   = "turn started"
	msgTurnCompleted = "turn completed"
	msgTurnFailed    = "turn failed"
	// A turn whose lease moved while it ran (its replica frozen, starved
	// or cut off): nothing of it was recorded; counted as failed, outcome
	// abandoned.
	msgTurnAbandoned = "turn abandoned: lease moved"
	// A let-go of every agent at once, and the taking back after it.
	msgLetGo     = "letting every agent go: another replica may have taken them; those nobody took are taken back unchanged"
	msgTakenBack = "agents taken back after a let-go"
	// The let-go line of versions before the summary line.
	msgLetGoOld   = "this replica's record could not be renewed in time; letting every agent go"
	msgDeadLetter = "message rejected to the dead-letter subject"
	msgDropped    = "message dropped"
	msgDuplicate  = "duplicate of a handled message; acked without a turn"
	msgThrottled  = "turn throttled"
	// A message a recorded turn named, acked without a turn; and a
	// resumable turn given up because its messages did not come again.
	msgAlreadyHandled = "message already handled by a recorded turn; acked without a second turn"
	msgAbandoned      = "unfinished turn abandoned: its messages did not come back in time"
	// Lease changes: a dead replica's lease taken after it expired, a
	// lease released to the replica an agent was handed over to, and the
	// ways a replica lets an agent go that it did not hand over.
	msgTakenOver   = "lease taken over"
	msgHandingOver = "handing agent over: no new turn starts here; a running turn may finish"
	msgHandedOver  = "agent handed over: lease released"
	// One line per agent a replica lets go, whatever the cause (reason
	// "lost": another replica holds its lease, or this one's record could
	// not be renewed in time).
	msgAgentLetGo = "agent no longer owned here"
)

// The kinds of LeaseChange.
const (
	leaseTakenOver   = "taken over"   // from a replica whose lease expired
	leaseHandingOver = "handing over" // no new turn; a running one may finish
	leaseHandedOver  = "handed over"
	leaseLost        = "lost" // let go, not handed over
)

// Completion is one "turn completed" log line.
type Completion struct {
	Time   time.Time
	Agent  string
	Turn   uint64
	IDs    []string
	Source string // the replica whose log it came from
}

// Failure is one "turn failed" log line.
type Failure struct {
	Time    time.Time
	Agent   string
	Turn    uint64
	Outcome string
	Error   string
	Source  string
}

// LeaseChange is one log line saying an agent changes owner: Kind is
// leaseTakenOver (Source took it; Peer held it), leaseHandingOver (Source
// starts handing it over to Peer), leaseHandedOver (Source released it
// for Peer) or leaseLost (Source let it go; Msg says why).
type LeaseChange struct {
	Time         time.Time
	Kind, Msg    string
	Agent        string
	Source, Peer string
}

// Ledger accounts for messages by id, from the JSON log lines of every
// worker process of one scenario. It is not safe for concurrent use.
type Ledger struct {
	handled     map[string]int       // id → completed turns whose ids name it
	handledBy   map[delivery]int     // (agent, id) → completed turns of agent naming id
	deadFor     map[delivery]string  // (agent, id) → reason of its dead letter
	droppedFor  map[delivery]string  // (agent, id) → why the worker dropped it
	ackedAs     map[delivery]uint64  // (agent, id) → the recorded turn it was acked as handled by
	abandoned   []Completion         // unfinished turns given up (Turn: the journal's), in the order read
	first       map[string]time.Time // id → log time of the first of them
	dead        map[string]string    // id → reason of its dead letter
	dropped     map[string]string    // id → why the worker dropped it
	completions []Completion         // every completed turn, in the order read
	failed      map[string]int       // outcome → failed turns
	failures    []Failure            // every failed turn, in the order read
	leases      []LeaseChange        // every change of owner, in the order read
	letGos      []LetGo              // every let-go of all agents, in the order read
	takenBack   []LetGo              // every take-back after one
	why         map[string]string    // outcome → the error of its first failed turn
	duplicates  int                  // redeliveries acked without a turn
	throttled   map[string]int       // reason → turns made to wait
	malformed   int                  // complete lines that are not JSON
	example     string               // the first of them, cut short
	// lives counts each source's "worker started" lines: a process life
	// is (source, its count when the line was read).
	lives map[string]int
	// started, ended: the turns started, and those a completed or failed
	// line ended, by (agent, turn, process life); top is the highest turn
	// number each process life logged for each agent.
	started map[lifeTurn][]string
	ended   map[lifeTurn]bool
	top     map[agentLife]uint64
}

// life is one process life of a worker: its source and how many times it
// had started when a line was read.
type life struct {
	source string
	n      int
}

type agentLife struct {
	agent string
	life  life
}

type lifeTurn struct {
	agent string
	turn  uint64
	life  life
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{handled: map[string]int{}, handledBy: map[delivery]int{}, deadFor: map[delivery]string{}, droppedFor: map[delivery]string{}, ackedAs: map[delivery]uint64{}, first: map[string]time.Time{}, dead: map[string]string{}, dropped: map[string]string{}, failed: map[string]int{}, why: map[string]string{}, throttled: map[string]int{},
		lives: map[string]int{}, started: map[lifeTurn][]string{}, ended: map[lifeTurn]bool{}, top: map[agentLife]uint64{}}
}

// logLine holds the attributes of the lines the ledger reads.
type logLine struct {
	Time      time.Time `json:"time"`
	Msg       string    `json:"msg"`
	Agent     string    `json:"agent"`
	Turn      uint64    `json:"turn"`
	IDs       []string  `json:"ids"`
	ID        string    `json:"id"`
	Reason    string    `json:"reason"`
	Outcome   string    `json:"outcome"`
	Error     string    `json:"error"`
	To        string    `json:"to"`       // agent handed over
	Previous  string    `json:"previous"` // lease taken over
	Journal   uint64    `json:"journal_turn"`
	Why       string    `json:"why"`        // a let-go's
	Agents    int       `json:"agents"`     // a let-go's agents
	TakenBack int       `json:"taken_back"` // a take-back's agents
	LetGo     int       `json:"let_go"`     // of those let go
}

// Consume reads the complete lines of data, those ending in a newline,
// and returns how many bytes they take. A final line without its newline
// (a process killed mid-write, or one still writing) is left unread for
// the caller to offer again once it is complete. Lines that are not JSON
// are counted as malformed and otherwise ignored; lines with other
// messages are ignored.
func (l *Ledger) Consume(data []byte, source string) int {
	used := 0
	for {
		i := bytes.IndexByte(data[used:], '\n')
		if i < 0 {
			return used
		}
		l.line(data[used:used+i], source)
		used += i + 1
	}
}

func (l *Ledger) line(b []byte, source string) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return
	}
	var head struct {
		Msg string `json:"msg"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		if l.malformed == 0 {
			l.example = string(b[:min(len(b), 120)])
		}
		l.malformed++
		return
	}
	switch head.Msg {
	case msgWorkerStarted, msgTurnStarted, msgTurnCompleted, msgTurnFailed, msgTurnAbandoned, msgDeadLetter, msgDropped, msgDuplicate, msgThrottled, msgAlreadyHandled, msgAbandoned,
		msgTakenOver, msgHandingOver, msgHandedOver, msgAgentLetGo, msgLetGo, msgLetGoOld, msgTakenBack:
	default:
		return
	}
	var e logLine
	if err := json.Unmarshal(b, &e); err != nil {
		l.malformed++
		return
	}
	lf := life{source, l.lives[source]}
	if e.Msg == msgTurnAbandoned {
		e.Msg, e.Outcome = msgTurnFailed, "abandoned"
	}
	if e.Msg == msgTurnStarted || e.Msg == msgTurnCompleted || e.Msg == msgTurnFailed {
		al := agentLife{e.Agent, lf}
		l.top[al] = max(l.top[al], e.Turn)
	}
	switch e.Msg {
	case msgWorkerStarted:
		l.lives[source]++
	case msgTurnStarted:
		l.started[lifeTurn{e.Agent, e.Turn, lf}] = e.IDs
	case msgTurnCompleted:
		l.ended[lifeTurn{e.Agent, e.Turn, lf}] = true
		for _, id := range e.IDs {
			if l.handled[id] == 0 {
				l.first[id] = e.Time
			}
			l.handled[id]++
			l.handledBy[delivery{e.Agent, id}]++
		}
		l.completions = append(l.completions, Completion{Time: e.Time, Agent: e.Agent, Turn: e.Turn, IDs: e.IDs, Source: source})
	case msgTurnFailed:
		if l.failed[e.Outcome] == 0 {
			l.why[e.Outcome] = e.Error
		}
		l.failed[e.Outcome]++
		l.failures = append(l.failures, Failure{Time: e.Time, Agent: e.Agent, Turn: e.Turn, Outcome: e.Outcome, Error: e.Error, Source: source})
		l.ended[lifeTurn{e.Agent, e.Turn, lf}] = true
	case msgDeadLetter:
		l.dead[e.ID] = e.Reason
		l.deadFor[delivery{e.Agent, e.ID}] = e.Reason
	case msgDropped:
		l.dropped[e.ID] = e.Reason
		l.droppedFor[delivery{e.Agent, e.ID}] = e.Reason
	case msgDuplicate:
		l.duplicates++
	case msgAlreadyHandled:
		l.ackedAs[delivery{e.Agent, e.ID}] = e.Turn
	case msgAbandoned:
		l.abandoned = append(l.abandoned, Completion{Time: e.Time, Agent: e.Agent, Turn: e.Journal, Source: source})
	case msgThrottled:
		l.throttled[e.Reason]++
	case msgTakenOver:
		l.leases = append(l.leases, LeaseChange{Time: e.Time, Kind: leaseTakenOver, Msg: e.Msg, Agent: e.Agent, Source: source, Peer: e.Previous})
	case msgHandingOver:
		l.leases = append(l.leases, LeaseChange{Time: e.Time, Kind: leaseHandingOver, Msg: e.Msg, Agent: e.Agent, Source: source, Peer: e.To})
	case msgHandedOver:
		l.leases = append(l.leases, LeaseChange{Time: e.Time, Kind: leaseHandedOver, Msg: e.Msg, Agent: e.Agent, Source: source, Peer: e.To})
	case msgAgentLetGo:
		if e.Reason == "lost" {
			l.leases = append(l.leases, LeaseChange{Time: e.Time, Kind: leaseLost, Msg: e.Msg, Agent: e.Agent, Source: source})
		}
	case msgLetGo:
		l.letGos = append(l.letGos, LetGo{Time: e.Time, Source: source, Why: e.Why, Agents: e.Agents})
	case msgLetGoOld:
		l.letGos = append(l.letGos, LetGo{Time: e.Time, Source: source, Why: "late_renewal"})
	case msgTakenBack:
		l.takenBack = append(l.takenBack, LetGo{Time: e.Time, Source: source, Why: e.Why, Agents: e.TakenBack, Of: e.LetGo})
	}
}

// LetGo is one line of a replica letting every agent go at once (Agents:
// how many), or taking them back after it (Agents: how many, Of: of how
// many let go).
type LetGo struct {
	Time        time.Time
	Source, Why string
	Agents, Of  int
}

// LetGos returns the let-gos of every agent logged, in the order read.
func (l *Ledger) LetGos() []LetGo { return l.letGos }

// TakenBack returns the take-backs after let-gos, in the order read.
func (l *Ledger) TakenBack() []LetGo { return l.takenBack }

// Accounted reports whether id was handled by a completed turn or
// dead-lettered.
func (l *Ledger) Accounted(id string) bool {
	_, dead := l.dead[id]
	return l.handledCount(id) > 0 || dead
}

// handledCount is how many completed turns named id, or 1 when none did
// but a recorded turn whose process died before its line handled it
// (recordedUnlogged).
func (l *Ledger) handledCount(id string) int {
	if n := l.handled[id]; n > 0 {
		return n
	}
	if _, ok := l.recordedUnlogged("", id); ok {
		return 1
	}
	return 0
}

// recordedUnlogged returns the turn that handled id (for agent; "" any)
// without a "turn completed" line: a turn started naming id in a process
// life that logged neither its completion nor its failure, and a later
// process life logged a higher turn number for the agent. A new owner
// numbers its turns on from the newest recorded one, so that turn was
// recorded: its process died between the record and the line (kill -9).
func (l *Ledger) recordedUnlogged(agent, id string) (lifeTurn, bool) {
	for k, ids := range l.started {
		if (agent != "" && k.agent != agent) || l.ended[k] || !slices.Contains(ids, id) {
			continue
		}
		for al, top := range l.top {
			if al.agent == k.agent && al.life != k.life && top > k.turn {
				return k, true
			}
		}
	}
	return lifeTurn{}, false
}

// RecordedUnlogged describes the deliveries of o handled only by such a
// turn: `s-m0042 to a03: turn 17 on r2 (its process died before it logged
// the turn)`, sorted.
func (l *Ledger) RecordedUnlogged(o owed) []string {
	var out []string
	for _, d := range o.deliveries() {
		if l.handledBy[d] > 0 {
			continue
		}
		if k, ok := l.recordedUnlogged(d.agent, d.id); ok {
			out = append(out, fmt.Sprintf("%s: turn %d on %s (its process died after recording the turn, before logging it)", d, k.turn, k.life.source))
		}
	}
	return out
}

// Unaccounted counts the ids neither handled nor dead-lettered.
func (l *Ledger) Unaccounted(ids []string) int {
	n := 0
	for _, id := range ids {
		if !l.Accounted(id) {
			n++
		}
	}
	return n
}

// Count is where the published messages of a scenario ended up.
type Count struct {
	Published int
	Handled   int            // named by at least one completed turn
	Twice     int            // named by two or more completed turns
	Dead      int            // dead-lettered
	Reasons   map[string]int // dead letters by reason
	Lost      int            // neither handled nor dead-lettered
	Dropped   int            // of the lost: logged as dropped by the worker
	Unknown   int            // handled ids the harness never saw acked
}

// add counts one message (or delivery) handled by n completed turns,
// dead-lettered for reason when dead, and dropped by the worker when
// dropped.
func (c *Count) add(n int, reason string, dead, dropped bool) {
	c.Published++
	if n > 0 {
		c.Handled++
	}
	if n > 1 {
		c.Twice++
	}
	if dead {
		c.Dead++
		c.Reasons[reason]++
	}
	if n == 0 && !dead {
		c.Lost++
		if dropped {
			c.Dropped++
		}
	}
}

// Count tallies published, the ids JetStream acknowledged, against the
// ledger. A message both handled and dead-lettered counts in both.
func (l *Ledger) Count(published []string) Count {
	c := Count{Reasons: map[string]int{}}
	known := make(map[string]bool, len(published))
	for _, id := range published {
		known[id] = true
		reason, dead := l.dead[id]
		_, dropped := l.dropped[id]
		c.add(l.handledCount(id), reason, dead, dropped)
	}
	for id := range l.handled {
		if !known[id] {
			c.Unknown++
		}
	}
	return c
}

// HandledAll returns the log time at which the last of ids was first
// handled, if all of them were.
func (l *Ledger) HandledAll(ids []string) (time.Time, bool) {
	var last time.Time
	for _, id := range ids {
		if l.handled[id] == 0 {
			return time.Time{}, false
		}
		if at := l.first[id]; at.After(last) {
			last = at
		}
	}
	return last, true
}

// Turns counts the completed turns of agent whose log time is in
// [from, to).
func (l *Ledger) Turns(agent string, from, to time.Time) int {
	n := 0
	for _, c := range l.completions {
		if c.Agent == agent && !c.Time.Before(from) && c.Time.Before(to) {
			n++
		}
	}
	return n
}

// CompletedOn counts the completed turns of agent logged by source whose
// log time is in [from, to).
func (l *Ledger) CompletedOn(agent, source string, from, to time.Time) int {
	n := 0
	for _, c := range l.completions {
		if c.Agent == agent && c.Source == source && !c.Time.Before(from) && c.Time.Before(to) {
			n++
		}
	}
	return n
}

// FirstCompletion returns the earliest completed turn after t of one of
// agents (any agent when empty) logged by source (any when "").
func (l *Ledger) FirstCompletion(t time.Time, agents []string, source string) (Completion, bool) {
	var best Completion
	found := false
	for _, c := range l.completions {
		if !c.Time.After(t) || (source != "" && c.Source != source) || (len(agents) > 0 && !slices.Contains(agents, c.Agent)) {
			continue
		}
		if !found || c.Time.Before(best.Time) {
			best, found = c, true
		}
	}
	return best, found
}

// HandledAt returns the log time of the first completed turn that named
// id, if one did.
func (l *Ledger) HandledAt(id string) (time.Time, bool) {
	t, ok := l.first[id]
	return t, ok
}

// FailuresSince returns the failed turns whose log time is after t, in
// the order read.
func (l *Ledger) FailuresSince(t time.Time) []Failure {
	var out []Failure
	for _, f := range l.failures {
		if f.Time.After(t) {
			out = append(out, f)
		}
	}
	return out
}

// LeaseChangesSince returns the changes of owner of kind ("" any) whose
// log time is after t, in the order read.
func (l *Ledger) LeaseChangesSince(t time.Time, kind string) []LeaseChange {
	var out []LeaseChange
	for _, c := range l.leases {
		if c.Time.After(t) && (kind == "" || c.Kind == kind) {
			out = append(out, c)
		}
	}
	return out
}

// LastSource returns the source of the latest completed turn of agent.
func (l *Ledger) LastSource(agent string) string {
	var last Completion
	for _, c := range l.completions {
		if c.Agent == agent && !c.Time.Before(last.Time) {
			last = c
		}
	}
	return last.Source
}

// Failed returns the failed turns by outcome, sorted by outcome.
func (l *Ledger) Failed() []OutcomeCount {
	var out []OutcomeCount
	for o, n := range l.failed {
		out = append(out, OutcomeCount{o, n, l.why[o]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Outcome < out[j].Outcome })
	return out
}

// Throttled returns the throttled turns by reason, sorted by reason.
func (l *Ledger) Throttled() []OutcomeCount {
	var out []OutcomeCount
	for r, n := range l.throttled {
		out = append(out, OutcomeCount{Outcome: r, N: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Outcome < out[j].Outcome })
	return out
}

// OutcomeCount is a number of turns with one outcome (or reason).
type OutcomeCount struct {
	Outcome string
	N       int
	First   string // failed turns: the error of the first
}

// Tail feeds growing log files to a ledger, reading each byte once.
type Tail struct {
	led  *Ledger
	offs map[string]int64 // path → bytes consumed
	srcs map[string]string
}

// NewTail returns a tail feeding led.
func NewTail(led *Ledger) *Tail {
	return &Tail{led: led, offs: map[string]int64{}, srcs: map[string]string{}}
}

// Add follows the file at path, whose lines come from source.
func (t *Tail) Add(path, source string) {
	if _, ok := t.offs[path]; !ok {
		t.offs[path] = 0
	}
	t.srcs[path] = source
}

// Poll reads the complete lines added to every file since the last poll.
// A missing file is read later.
func (t *Tail) Poll() error {
	for path, off := range t.offs {
		f, err := os.Open(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		if _, err = f.Seek(off, io.SeekStart); err == nil {
			var data []byte
			data, err = io.ReadAll(f)
			t.offs[path] = off + int64(t.led.Consume(data, t.srcs[path]))
		}
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// CompletionsOf returns agent's completed turns, in the order read.
func (l *Ledger) CompletionsOf(agent string) []Completion {
	var out []Completion
	for _, c := range l.completions {
		if c.Agent == agent {
			out = append(out, c)
		}
	}
	return out
}
