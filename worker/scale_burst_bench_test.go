package worker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The burst: m messages to scaleBurstAgents agents, timed from the first
// publish until the input stream is back to the count it held before
// (every message handled and purged), against a bare consumer doing the
// least that ends the same way on the same server.

// burstRound is one round of the burst, product or bare.
type burstRound struct {
	took    time.Duration // first publish → stream back (or the wait's end)
	handled time.Duration // first publish → last message-handled event (product)
	done    int64         // messages handled (product) or read (bare)
	purged  bool          // the stream was back within the wait
	folds   int64         // memory-compacted events (product)
	heap    float64       // heap growth over the round, bytes (product)
	quiet   time.Duration // after, until the process was quiet (not counted)
}

// rate is the round's messages per second to the last purge.
func (r burstRound) rate() float64 { return float64(r.done) / r.took.Seconds() }

// bareBurst is the burst's anchor, on its own stream of the worker's
// nats-server, SCALEBARE (limits retention, like the input stream): one
// ordered consumer reads every message, body and all, and a purger
// goroutine purges each subject below what was read whenever the reader
// has read 256 of its messages (an agent's inbox cap) or has caught up
// with the stream, coalescing what came meanwhile. It is the product's
// shape without its work: one reader per process (the product's router,
// which keeps the bodies for the agents' reads in its window), purges per subject off the reading path (the product's purger,
// once per settle), and nothing stored per message (the product stores a
// turn record per turn, cursors in it). Durable consumers acking on an
// interest stream, the anchor of the layout before the log, would do
// more than the product now does (an ack round trip per message).
type bareBurst struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	cc     jetstream.ConsumeContext
	read   atomic.Int64

	mu     sync.Mutex
	last   map[string]uint64 // subject → last sequence read
	unread map[string]int    // subject → read and not yet marked for purging
	due    map[string]uint64 // subject → purge below this + 1
	wake   chan struct{}
	stop   chan struct{}
	done   chan struct{}
}

// bareBurstCap is how many of a subject's messages the bare reader reads
// before it has them purged (the burst agents' inbox cap).
const bareBurstCap = 256

func newBareBurst(b *testing.B, nc *nats.Conn) *bareBurst {
	ctx := context.Background()
	js, _ := jetstream.New(nc)
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SCALEBARE", Subjects: []string{"scalebare.>"}, Retention: jetstream.LimitsPolicy})
	if err != nil {
		b.Fatal(err)
	}
	bb := &bareBurst{nc: nc, js: js, stream: s, last: map[string]uint64{}, unread: map[string]int{}, due: map[string]uint64{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	bb.cc, err = c.Consume(bb.take)
	if err != nil {
		b.Fatal(err)
	}
	go bb.purge()
	return bb
}

// take is the reader: it notes the message and marks its subject for
// purging at the cap or when caught up.
func (bb *bareBurst) take(m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		return
	}
	_ = m.Data() // read, as an agent reads its body
	bb.mu.Lock()
	subj := m.Subject()
	bb.last[subj] = meta.Sequence.Stream
	bb.unread[subj]++
	marked := false
	if bb.unread[subj] >= bareBurstCap {
		bb.due[subj], bb.unread[subj], marked = meta.Sequence.Stream, 0, true
	}
	if meta.NumPending == 0 {
		for s, n := range bb.unread {
			if n > 0 {
				bb.due[s], bb.unread[s], marked = bb.last[s], 0, true
			}
		}
	}
	bb.mu.Unlock()
	bb.read.Add(1)
	if marked {
		select {
		case bb.wake <- struct{}{}:
		default:
		}
	}
}

// purge purges what take marked, until stop.
func (bb *bareBurst) purge() {
	defer close(bb.done)
	for {
		select {
		case <-bb.stop:
			return
		case <-bb.wake:
		}
		bb.mu.Lock()
		due := bb.due
		bb.due = map[string]uint64{}
		bb.mu.Unlock()
		for subj, seq := range due {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = bb.stream.Purge(ctx, jetstream.WithPurgeSubject(subj), jetstream.WithPurgeSequence(seq+1))
			cancel()
		}
	}
}

// run publishes m messages round-robin to agents subjects (the product's
// publisher) and times them until SCALEBARE is back to what it held.
func (bb *bareBurst) run(b *testing.B, m, agents int) burstRound {
	read0 := bb.read.Load()
	before := streamMsgs(bb.js, "SCALEBARE")
	t0 := time.Now()
	publishBurst(b, bb.nc, m, agents, func(i int) string { return fmt.Sprintf("scalebare.%03d", i) })
	var r burstRound
	r.purged = waitStreamBack(bb.js, "SCALEBARE", before, 60*time.Second)
	r.took = time.Since(t0)
	r.done = bb.read.Load() - read0
	return r
}

func (bb *bareBurst) close() {
	if bb.cc == nil {
		return
	}
	bb.cc.Stop()
	close(bb.stop)
	<-bb.done
	bb.cc = nil
	_ = bb.js.DeleteStream(context.Background(), "SCALEBARE")
}

// scaleBursts runs the burst rounds: o.rounds times, the product then the
// bare anchor, each on a quiet process (quiet, not counted, after each).
// The product's heap is read around each round: the growth per handled
// message (AW_SCALE_HEAP writes heap profiles around the first round;
// AW_SCALE_CPU a CPU profile of each, burst1-cpu.pprof, burst2-cpu.pprof…).
func scaleBursts(b *testing.B, o scaleOptions, w *Worker, nc *nats.Conn, c *scaleCounts, r *prodScale, bare *bareScale) {
	bb := newBareBurst(b, nc)
	defer bb.close()
	heapDir := o.heapDir
	for round := range o.rounds {
		c.quiet(r.idleCPU)
		hb, tb, fb := c.handled.Load(), c.turns.Load(), c.folds.Load()
		heap1 := settledHeap()
		if round == 0 {
			writeProfile(b, heapDir, "before.pprof", "heap", 0)
		}
		js, name := w.NATS().JS, w.cfg.NATS.Stream
		before := streamMsgs(js, name)
		stopProfile := profileCPU(b, o.cpuDir, fmt.Sprintf("burst%d-cpu.pprof", round+1))
		cpu1 := cpuTime()
		t1 := time.Now()
		publishBurst(b, nc, o.burst, scaleBurstAgents, func(i int) string { return "agents." + scaleAgent(1+i) + ".inbox" })
		waitCount(func() int64 { return c.handled.Load() - hb }, int64(o.burst), 30*time.Second, 120*time.Second)
		p := burstRound{handled: time.Since(t1)}
		p.purged = waitStreamBack(js, name, before, 60*time.Second)
		p.took = time.Since(t1)
		r.burstCPU += cpuTime() - cpu1
		stopProfile()
		p.done = c.handled.Load() - hb
		r.burstHandled += p.done
		r.burstTurns += c.turns.Load() - tb
		p.folds = c.folds.Load() - fb
		p.heap = settledHeap() - heap1
		if round == 0 {
			r.burstHeap, r.burstHeapMsgs = p.heap, p.done
			writeProfile(b, heapDir, "after.pprof", "heap", 0)
		} else {
			r.steadyHeap, r.steadyHeapMsgs = p.heap, p.done
		}
		p.quiet = c.quiet(r.idleCPU)
		r.bursts = append(r.bursts, p)

		cpu2 := cpuTime()
		a := bb.run(b, o.burst, scaleBurstAgents)
		bare.burstCPU += cpuTime() - cpu2
		bare.burstRead += a.done
		tq := time.Now()
		cpuQuiet(r.idleCPU, tq.Add(10*time.Second))
		a.quiet = time.Since(tq)
		bare.bursts = append(bare.bursts, a)
	}
}
