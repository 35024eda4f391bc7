package tracing

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Limits of the batcher.
const (
	batchSize     = 512              // spans per export, at most
	batchQueue    = 4096             // spans held at most; more are dropped and said
	batchInterval = time.Second      // the longest a span waits to be sent
	exportTimeout = 10 * time.Second // one export, at most
)

// batcher is a batching span processor: ended spans are appended to a
// buffer under a lock and sent by one goroutine, when a batch is full or
// every batchInterval. Unlike the SDK's batch processor, which hands
// every span to its goroutine over a channel (a goroutine wake-up per
// span, seven per turn), an ended span costs a lock and an append; the
// goroutine wakes once per batch. A span that finds the buffer full
// (the receiver slower than the turns) is dropped, and the drops are
// reported through otel.Handle, which the command logs.
type batcher struct {
	exp sdktrace.SpanExporter

	mu      sync.Mutex
	buf     []sdktrace.ReadOnlySpan
	dropped int
	closed  bool

	full     chan struct{} // cap 1: a batch is ready
	stop     chan struct{}
	done     chan struct{}
	exportMu sync.Mutex // one export at a time
}

// newBatcher starts a batcher sending to exp at least every interval.
func newBatcher(exp sdktrace.SpanExporter, interval time.Duration) *batcher {
	b := &batcher{exp: exp, full: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go b.run(interval)
	return b
}

func (b *batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	b.mu.Lock()
	switch {
	case b.closed:
	case len(b.buf) >= batchQueue:
		b.dropped++
	default:
		b.buf = append(b.buf, s)
		if len(b.buf) == batchSize {
			select {
			case b.full <- struct{}{}:
			default:
			}
		}
	}
	b.mu.Unlock()
}

func (b *batcher) run(interval time.Duration) {
	defer close(b.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		whole := true // a full batch woke the loop: send full batches only
		select {
		case <-b.stop:
			return
		case <-tick.C:
			whole = false
		case <-b.full:
		}
		ctx, cancel := context.WithTimeout(context.Background(), exportTimeout)
		b.export(ctx, whole)
		cancel()
	}
}

// export sends what is buffered, a batch at a time; with whole, only
// full batches (the rest waits for the next tick or a full batch).
func (b *batcher) export(ctx context.Context, whole bool) error {
	b.exportMu.Lock()
	defer b.exportMu.Unlock()
	for {
		b.mu.Lock()
		n := min(len(b.buf), batchSize)
		if whole && n < batchSize {
			n = 0
		}
		batch := b.buf[:n:n]
		b.buf = b.buf[n:]
		if len(b.buf) == 0 {
			b.buf = nil // let the backing array go
		}
		dropped := b.dropped
		b.dropped = 0
		b.mu.Unlock()
		if dropped > 0 {
			otel.Handle(fmt.Errorf("%d spans dropped: more than %d waited to be exported", dropped, batchQueue))
		}
		if n == 0 {
			return nil
		}
		if err := b.exp.ExportSpans(ctx, batch); err != nil {
			otel.Handle(err)
			return err
		}
	}
}

func (b *batcher) ForceFlush(ctx context.Context) error { return b.export(ctx, false) }

func (b *batcher) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	<-b.done
	err := b.export(ctx, false)
	if serr := b.exp.Shutdown(ctx); err == nil {
		err = serr
	}
	return err
}
