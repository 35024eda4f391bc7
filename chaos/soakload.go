package main

import (
	"context"
	"slices"
	"time"
)

// The kinds of the soak's messages, the letter in their ids.
const (
	kindInbox    = "m" // an agent's inbox
	kindDeferred = "d" // an agent's deferred subject
	kindShared   = "s" // the shared subject: owed to each agent binding it
	kindBurst    = "b" // a burst fault's, to one agent's inbox
	kindKeep     = "k" // the drain's keep-alives, to an agent's inbox
)

// steadyMessage returns the i-th message of the steady load and its kind:
// round-robin over agents, of every seven one on the shared subject, two
// deferred and four to an inbox (seven and twelve agents being coprime,
// every agent gets every kind).
func steadyMessage(i int, agents []string) (string, message) {
	a := agents[i%len(agents)]
	switch i % 7 {
	case 0:
		return kindShared, message{subject: sharedPublish}
	case 1, 4:
		return kindDeferred, message{agent: a, deferred: true}
	}
	return kindInbox, message{agent: a}
}

// owedTo returns the agents a message is for: those binding the shared
// subject for a message on it, else its agent.
func owedTo(m message, shared []string) []string {
	if m.subject == sharedPublish {
		return slices.Clone(shared)
	}
	return []string{m.agent}
}

// send publishes m with an id of kind and, once JetStream acked it,
// records whom it is owed to.
func (s *soak) send(kind string, m message) (string, error) {
	id, err := s.pub.publish(s.ctx, kind, m)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.owe[id] = owedTo(m, s.shared)
	s.kinds[kind]++
	s.mu.Unlock()
	return id, nil
}

// load publishes the steady load in the background, one message every
// soakInterval (a tick missed while a publish waits for NATS is skipped,
// not made up), until the returned function is called.
func (s *soak) load() (stop func() error) {
	halt := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		t := time.NewTicker(soakInterval)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-halt:
				done <- nil
				return
			case <-s.ctx.Done():
				done <- context.Cause(s.ctx)
				return
			case <-t.C:
			}
			kind, m := steadyMessage(i, s.agents)
			if _, err := s.send(kind, m); err != nil {
				done <- err
				return
			}
		}
	}()
	return s.stopper(halt, done)
}
