package natsbus

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// serverLog routes the embedded nats-server's log into the worker's log,
// every record with component=nats-server:
//
//	Errorf, Fatalf  -> Error  (Fatalf does not exit: the worker decides)
//	Warnf           -> Warn
//	Noticef         -> Debug  (the start-up banner and routine notices)
//	Debugf, Tracef  -> Debug  (the server calls them only when its debug
//	                           and trace flags are on; they are off)
//
// Errors and warnings that say the store failed (see storageLine) are
// also reported to onStorage, which must not block: the server calls its
// logger with its own locks held.
//
// A permission violation (a publisher reaching past what it may do) is a
// WARN, at most one line a minute with the count of those folded into it
// since the last (violations), so that a client cannot flood the log;
// the worker's own exposure probe's are Debug.
type serverLog struct {
	log        *slog.Logger
	onStorage  func(line string)
	violations *violations
}

var _ server.Logger = serverLog{}

func (l serverLog) Noticef(format string, v ...any) { l.emit(slog.LevelDebug, format, v) }
func (l serverLog) Debugf(format string, v ...any)  { l.emit(slog.LevelDebug, format, v) }
func (l serverLog) Tracef(format string, v ...any)  { l.emit(slog.LevelDebug, format, v) }
func (l serverLog) Warnf(format string, v ...any)   { l.emit(slog.LevelWarn, format, v) }
func (l serverLog) Errorf(format string, v ...any)  { l.emit(slog.LevelError, format, v) }
func (l serverLog) Fatalf(format string, v ...any)  { l.emit(slog.LevelError, format, v) }

func (l serverLog) emit(level slog.Level, format string, v []any) {
	watch := level >= slog.LevelWarn && l.onStorage != nil
	if !watch && !l.log.Enabled(context.Background(), level) {
		return
	}
	msg := fmt.Sprintf(format, v...)
	if watch && storageLine(msg) {
		l.onStorage(msg)
	}
	if strings.Contains(msg, " Violation - ") {
		l.violation(msg)
		return
	}
	l.log.Log(context.Background(), level, msg, "component", "nats-server")
}

// violationEvery is how often a permission violation is logged at most.
const violationEvery = time.Minute

// violations counts the permission violations not logged yet.
type violations struct {
	mu     sync.Mutex
	last   time.Time
	folded int
}

func (l serverLog) violation(msg string) {
	if strings.Contains(msg, probeName) || l.violations == nil {
		l.log.Debug(msg, "component", "nats-server")
		return
	}
	v := l.violations
	v.mu.Lock()
	now := time.Now()
	if !v.last.IsZero() && now.Sub(v.last) < violationEvery {
		v.folded++
		v.mu.Unlock()
		return
	}
	folded := v.folded
	v.last, v.folded = now, 0
	v.mu.Unlock()
	l.log.Warn("NATS refused a client what its permissions do not allow (a publisher reaching for the worker's state, control or internal subjects): "+msg,
		"component", "nats-server", "unlogged_since_last", folded, "logged_at_most_every", violationEvery.String())
}

// storageLine reports whether a server error or warning says that a
// write to the JetStream store failed: the disk is full, read-only or
// over quota, or a store hit a critical (sticky) write error. These are
// the lines nats-server logs when a standalone server's store fails
// (filestore.go setWriteErr "Critical write error", stream.go
// setWriteErrLocked "critical write error", stream.go processJetStreamMsg
// "JetStream failed to store a msg", jetstream.go handleOutOfSpace).
func storageLine(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{
		"no space left on device",
		"read-only file system",
		"disk quota exceeded",
		"critical write error",
		"jetstream out of",
		"permission denied while writing",
	} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
