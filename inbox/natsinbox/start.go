package natsinbox

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// startLog starts reading the stream as a log, missing nothing: it takes
// the stream's last sequence and its subjects that hold messages in one
// answer, starts the router after that sequence, and then marks every
// input with messages at or below it (a hint its reader follows once the
// agent is owned here), dead-letters what waits for agents that are not
// configured, and says which subjects hold messages no agent binds any
// more (left in place: another replica's newer config may bind them).
func (b *Binding) startLog(ctx context.Context) error {
	s, err := b.js.Stream(ctx, b.opts.Stream)
	if err != nil {
		return fmt.Errorf("stream %s: %w", b.opts.Stream, err)
	}
	b.stream = s
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		return fmt.Errorf("stream %s: subjects with messages: %w", b.opts.Stream, err)
	}
	last := info.State.LastSeq
	b.unknown = make(chan unknownMsg, unknownQueue)
	b.work.Add(1)
	go b.deadLetterUnknown()
	b.purger = newPurger(b)
	b.work.Add(1)
	go b.purger.run()
	// The subscribe: bindings new since the last start begin after last;
	// the others keep where they begin (binders.go).
	if b.binders != nil {
		if err := b.binders.started(ctx, b.rosterBindings(), b.rosterAgents(), last); err != nil {
			return fmt.Errorf("stream %s: record the subscribe: bindings: %w", b.opts.Stream, err)
		}
		for _, a := range b.lineup() {
			b.startAt(a)
		}
	}
	// Until the hints below say otherwise, no input has anything waiting
	// at or below last: the window holds all of each (none of it).
	for _, a := range b.lineup() {
		for _, in := range a.inputs {
			b.win.open(in, last)
		}
	}
	if err := b.startRouter(ctx, last); err != nil {
		return err
	}
	defer raise(&b.routed, last) // once the hints below are placed
	found, stale := 0, 0
	for subj := range info.State.Subjects {
		switch b.route(subj, last, true, time.Time{}, nil) {
		case routed:
			found++
		case unrouted:
			stale++
			b.opts.Log.Warn("messages wait on a subject no configured agent binds; they stay in the input stream until an agent binds it again or they are purged by hand (nats stream purge --subject)",
				"stream", b.opts.Stream, "subject", subj, "messages", info.State.Subjects[subj])
		}
	}
	b.opts.Log.Info("input log", "stream", b.opts.Stream, "last_seq", last, "messages", info.State.Msgs,
		"subjects_with_input", found, "subjects_nobody_binds", stale)
	return nil
}
