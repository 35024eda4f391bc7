// Package outage marks errors caused by a dependency being unavailable —
// the state store, NATS, a model provider — rather than by the work being
// done, so the driver can hold and retry a turn instead of blaming the
// messages in it. It holds no state and must not decide what a caller does
// with the answer.
package outage

import "errors"

// ErrUnavailable is wrapped by every error Mark returns.
var ErrUnavailable = errors.New("dependency unavailable")

// Error is err marked as an outage of Dependency.
type Error struct {
	// Dependency names what was unavailable: "store", "nats", "model
	// provider".
	Dependency string
	Err        error
}

// Error returns the cause's text unchanged: marking adds meaning, not words.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns both the cause and ErrUnavailable, so errors.Is answers
// for either.
func (e *Error) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// Mark wraps err as an outage of dependency. A nil err stays nil; an error
// already marked is returned as it is, so the innermost dependency names
// the outage.
func Mark(dependency string, err error) error {
	if err == nil || Is(err) {
		return err
	}
	return &Error{Dependency: dependency, Err: err}
}

// Is reports whether err, or an error it wraps, was marked as an outage.
func Is(err error) bool { return errors.Is(err, ErrUnavailable) }

// Dependency returns the dependency an outage error names, or "".
func Dependency(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Dependency
	}
	return ""
}
