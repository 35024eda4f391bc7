// Package syncbuf is a bytes.Buffer that goroutines may write while a
// test reads it: the log of a worker, a server's output. It is for tests;
// it must not hold anything a test does not read.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for concurrent use; the zero value is empty.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Reset forgets what was written so far.
func (s *Buffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}
