package worker

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/adk/model"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/models/scripted"
)

// benchWorker starts a worker whose model reports when each call starts.
func benchWorker(b *testing.B, agentYAML string, callStarted func(time.Time)) (*Worker, *nats.Conn) {
	// The default ack wait: in-progress acks for waiting messages are sent
	// every ack_wait/3, as in production.
	cfg := writeConfig(b, setup{dataDir: b.TempDir(), agent: agentYAML, ackWait: "30s"})
	w, err := Start(context.Background(), cfg, Options{
		Models: func(_ string, def config.Model) (model.LLM, error) {
			return scripted.New("fake", def, scripted.WithHook(func(context.Context, *model.LLMRequest, int) error {
				callStarted(time.Now())
				return nil
			}))
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	nc, err := nats.Connect(w.NATS().ClientURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close(); w.Stop(context.Background()) })
	return w, nc
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

// BenchmarkNATSWakeLatency prints, in one run on loopback, the latency
// from a publish on an agent's inbox subject to its model call starting,
// next to a bare JetStream publish → pull-consumer callback on the same
// server measured the same way (goal: p50 ratio ≤ 1.5).
func BenchmarkNATSWakeLatency(b *testing.B) {
	const n = 300
	for range b.N {
		// Every model call reports its start, the memory's folds between
		// turns too (one every few turns once the history window is full):
		// never blocking the model, and a turn's call is the first that
		// starts after its publish.
		started := make(chan time.Time, 64)
		// Past its 20th turn the default turns_per_hour (360, a burst of
		// 20) would space the turns 10s apart: the wake path is measured,
		// not that limit.
		w, nc := benchWorker(b, "    limits: {turns_per_hour: 100000000, turn_burst: 100000000}", func(t time.Time) {
			select {
			case started <- t:
			default:
			}
		})
		done := w.Events().Subscribe(16, func(e events.Event) bool { return e.Type == events.TurnCompleted })

		// Bare JetStream on the same server.
		js, _ := jetstream.New(nc)
		ctx := context.Background()
		s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BARE", Subjects: []string{"bare.>"}})
		if err != nil {
			b.Fatal(err)
		}
		c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "bare", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			b.Fatal(err)
		}
		got := make(chan time.Time, 1)
		cc, err := c.Consume(func(m jetstream.Msg) { got <- time.Now(); _ = m.Ack() })
		if err != nil {
			b.Fatal(err)
		}

		agent, bare := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
		for i := range n + 20 { // the first 20 of each warm up
			t0 := time.Now()
			if err := nc.Publish("agents.triage.inbox", []byte(fmt.Sprintf("alert %d", i))); err != nil {
				b.Fatal(err)
			}
			_ = nc.Flush()
			t1 := <-started
			for t1.Before(t0) { // a fold's, from before this publish
				t1 = <-started
			}
			<-done.C
			t2 := time.Now()
			if err := nc.Publish("bare.x", []byte(fmt.Sprintf("alert %d", i))); err != nil {
				b.Fatal(err)
			}
			_ = nc.Flush()
			t3 := <-got
			if i >= 20 {
				agent = append(agent, t1.Sub(t0))
				bare = append(bare, t3.Sub(t2))
			}
		}
		cc.Stop()
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "wake latency, %d wakes\tp50\tp99\t\n", n)
		fmt.Fprintf(tw, "publish → agent's model call\t%v\t%v\t\n", percentile(agent, .5).Round(time.Microsecond), percentile(agent, .99).Round(time.Microsecond))
		fmt.Fprintf(tw, "publish → bare JetStream consume\t%v\t%v\t\n", percentile(bare, .5).Round(time.Microsecond), percentile(bare, .99).Round(time.Microsecond))
		ratio := float64(percentile(agent, .5)) / float64(percentile(bare, .5))
		fmt.Fprintf(tw, "ratio (goal p50 ≤ 1.5)\t%.2f\t%.2f\t\n", ratio, float64(percentile(agent, .99))/float64(percentile(bare, .99)))
		tw.Flush()
		b.ReportMetric(ratio, "p50-ratio")
	}
}

// BenchmarkNATSDeferredIngest prints the rate at which deferred messages
// published on loopback reach the agent's inbox, next to the rate a bare
// JetStream pull consumer on the same server receives the same load
// (goal: ≥ 80% of it). The two alternate for three rounds each and the
// medians are compared, so one noisy moment of a shared machine does not
// decide the ratio.
func BenchmarkNATSDeferredIngest(b *testing.B) {
	const n, rounds = 10000, 3
	body := []byte(`{"text": "deferred context line for the next turn", "from": "bench"}`)
	for range b.N {
		var agentRates, bareRates []float64
		for round := range rounds {
			w, nc := benchWorker(b, fmt.Sprintf("    inbox: {cap: %d}", n), func(time.Time) {})
			a, _ := w.Driver().Agent("triage")
			t0 := time.Now()
			for range n {
				if err := nc.Publish("agents.triage.deferred", body); err != nil {
					b.Fatal(err)
				}
			}
			_ = nc.Flush()
			for a.Status().Deferred < n {
				<-time.After(time.Millisecond)
			}
			agentRates = append(agentRates, float64(n)/time.Since(t0).Seconds())

			js, _ := jetstream.New(nc)
			ctx := context.Background()
			name := fmt.Sprintf("BARE%d", round)
			s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"bare" + name + ".>"}, Retention: jetstream.InterestPolicy})
			if err != nil {
				b.Fatal(err)
			}
			c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "bare", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: n})
			if err != nil {
				b.Fatal(err)
			}
			var count atomic.Int64
			all := make(chan struct{})
			cc, err := c.Consume(func(jetstream.Msg) {
				if count.Add(1) == n {
					close(all)
				}
			}, jetstream.PullMaxMessages(n))
			if err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			for range n {
				if err := nc.Publish("bare"+name+".deferred", body); err != nil {
					b.Fatal(err)
				}
			}
			_ = nc.Flush()
			<-all
			bareRates = append(bareRates, float64(n)/time.Since(t1).Seconds())
			cc.Stop()
		}
		slices.Sort(agentRates)
		slices.Sort(bareRates)
		agentRate, bareRate := agentRates[rounds/2], bareRates[rounds/2]
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "deferred ingest, %d messages, median of %d\tmsgs/s\t\n", n, rounds)
		fmt.Fprintf(tw, "publish → agent inbox\t%.0f\t\n", agentRate)
		fmt.Fprintf(tw, "publish → bare JetStream consume\t%.0f\t\n", bareRate)
		fmt.Fprintf(tw, "agent/bare (goal ≥ 0.80)\t%.2f\t\n", agentRate/bareRate)
		tw.Flush()
		b.ReportMetric(agentRate/bareRate, "rate-ratio")
	}
}
