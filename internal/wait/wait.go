// Package wait polls a test's condition until it holds (For, Within,
// NoError), or reads an event subscription until an event matches (Event),
// and fails the test naming what it waited for when a deadline passes. It is the one way the
// tests here wait for something another goroutine or process does; it is
// for tests only (it takes a testing.TB and sleeps on the wall clock), and
// it never waits past its deadline.
package wait

import (
	"errors"
	"testing"
	"time"
)

// Deadline is how long For waits: long enough for a loaded machine running
// the race detector, short enough that a test that hangs fails well before
// go test's own timeout. Waits that need longer say so with Within.
const Deadline = 20 * time.Second

// maxPause bounds the pause between two polls. The pauses start at a
// millisecond and double, so a cheap condition that holds soon is seen at
// once, while a slow one (an HTTP request, a JetStream call) is asked at
// most about a hundred times a second.
const maxPause = 10 * time.Millisecond

// For polls cond until it returns true, for at most Deadline. When the
// deadline passes first, it fails the test with t.Fatalf naming what.
// cond is called from the test's goroutine; it must not block for long,
// since the deadline is only checked between calls.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Deadline, what, cond)
}

// Within is For with its own deadline: it polls cond until it returns true
// and fails the test with t.Fatalf naming what if within passes first.
func Within(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if poll(within, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}) != nil {
		t.Fatalf("timed out after %v waiting for %s", within, what)
	}
}

// NoError polls cond until it returns nil, for at most within. When the
// deadline passes first, it fails the test with t.Fatalf naming what and
// cond's last error, which should say how far from done things were.
func NoError(t testing.TB, within time.Duration, what string, cond func() error) {
	t.Helper()
	if err := poll(within, cond); err != nil {
		t.Fatalf("timed out after %v waiting for %s: %v", within, what, err)
	}
}

// errNotYet is what a false condition of For and Within counts as.
var errNotYet = errors.New("condition not met")

// poll calls cond until it returns nil or within has passed since poll
// began, and returns cond's last error. cond is always called at least
// once, and a wait fails only on a call that ended past the deadline, so a
// condition that holds by then is never reported as a failure.
func poll(within time.Duration, cond func() error) error {
	end := time.Now().Add(within)
	pause := time.Millisecond
	for {
		err := cond()
		if err == nil || time.Now().After(end) {
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPause)
	}
}
