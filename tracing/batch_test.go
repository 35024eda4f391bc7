package tracing

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// gate is an exporter that counts the spans it is given and can be held.
type gate struct {
	mu      sync.Mutex
	spans   int
	sizes   []int
	hold    chan struct{} // non-nil: exports wait until it is closed
	entered chan struct{} // receives as each export begins
	got     chan int      // receives each export's size
}

func (g *gate) ExportSpans(ctx context.Context, s []sdktrace.ReadOnlySpan) error {
	g.mu.Lock()
	hold := g.hold
	g.mu.Unlock()
	if g.entered != nil {
		g.entered <- struct{}{}
	}
	if hold != nil {
		<-hold
	}
	g.mu.Lock()
	g.spans += len(s)
	g.sizes = append(g.sizes, len(s))
	g.mu.Unlock()
	g.got <- len(s)
	return nil
}

func (g *gate) Shutdown(context.Context) error { return nil }

func spans(t *testing.T, tp *sdktrace.TracerProvider, n int) {
	t.Helper()
	for range n {
		_, s := tp.Tracer("t").Start(context.Background(), "s")
		s.End()
	}
}

// A full batch is sent without waiting for the tick, in batches of at
// most batchSize; ForceFlush sends the rest; Shutdown sends what is left
// and takes no more.
func TestBatcherSendsFullBatchesAndFlushes(t *testing.T) {
	t.Parallel()
	g := &gate{got: make(chan int, 100)}
	b := newBatcher(g, time.Hour) // no tick during the test
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
	spans(t, tp, batchSize+10)
	select {
	case n := <-g.got:
		if n != batchSize {
			t.Fatalf("first export of %d spans, want a full batch of %d", n, batchSize)
		}
	case <-time.After(20 * time.Second): // a failure guard, not a wait
		t.Fatal("a full batch was not sent")
	}
	if err := b.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans(t, tp, 3)
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans(t, tp, 5) // after shutdown: not taken
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.spans != batchSize+13 {
		t.Errorf("exported %d spans (batches %v), want %d", g.spans, g.sizes, batchSize+13)
	}
}

// Spans that find the queue full are dropped, and the drop is reported
// through otel.Handle. The process's error handler is set here: no
// other test of the package sets it.
func TestBatcherDropsAndSaysSo(t *testing.T) {
	var mu sync.Mutex
	var reported []error
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		reported = append(reported, err)
		mu.Unlock()
	}))
	g := &gate{got: make(chan int, 100), hold: make(chan struct{}), entered: make(chan struct{}, 100)}
	b := newBatcher(g, time.Hour)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
	spans(t, tp, batchSize)
	<-g.entered // the batch is taken; its export is held
	spans(t, tp, batchQueue+7)
	close(g.hold)
	if err := b.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = tp.Shutdown(context.Background())
	mu.Lock()
	defer mu.Unlock()
	var said error
	for _, e := range reported {
		if strings.Contains(e.Error(), "spans dropped") {
			said = errors.Join(said, e)
		}
	}
	if said == nil || !strings.Contains(said.Error(), "7 spans dropped") {
		t.Errorf("drops reported: %v, want 7 spans dropped", reported)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.spans != batchSize+batchQueue {
		t.Errorf("exported %d, want %d", g.spans, batchSize+batchQueue)
	}
}
