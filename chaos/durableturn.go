package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// durableKills is how many times the durable-turn scenario kills its
// worker.
const durableKills = 5

// durableTurn: a worker whose every turn publishes a report and then
// waits for the model is killed with SIGKILL in that wait, five times; the
// turns resume from their journals after each restart.
func durableTurn(e *env) error {
	_, url, err := e.nats()
	if err != nil {
		return err
	}
	prov, err := newProvider(1500 * time.Millisecond)
	if err != nil {
		return err
	}
	defer prov.close()
	if err := os.Setenv("CHAOS_PROVIDER_KEY", "chaos"); err != nil {
		return err
	}
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	reports, w, err := durableSetUp(e, url, nc, prov)
	if err != nil {
		return err
	}
	durableStory(e)
	stop := e.loadUntil(250*time.Millisecond, one)
	landed, err := durableKillMidTurn(e, w, prov)
	if err != nil {
		return err
	}
	if err := stop(); err != nil {
		return err
	}
	if err := e.drain(drainTimeout, one); err != nil {
		return err
	}
	return durableCheck(e, w, prov, reports, landed)
}

// durableSetUp creates the stream that captures the reports and starts
// the worker, its model the fake provider prov.
func durableSetUp(e *env, url string, nc *nats.Conn, prov *provider) (jetstream.Stream, *service, error) {
	js, _ := jetstream.New(nc)
	reports, err := js.CreateStream(e.ctx, jetstream.StreamConfig{Name: "REPORTS", Subjects: []string{"ops.reports.>"}, Duplicates: 10 * time.Minute})
	if err != nil {
		return nil, nil, err
	}
	model := fmt.Sprintf("    provider: openai\n    model: gpt-chaos\n    base_url: %q\n    api_key_env: CHAOS_PROVIDER_KEY\n", prov.URL)
	w, err := e.startWorker(workerConf{natsURL: url, agents: one, model: model, tools: []string{"publish"},
		extra: map[string]string{"a1": "    publish: [\"ops.reports.>\"]\n"}, unthrottled: true}, url)
	if err != nil {
		return nil, nil, err
	}
	return reports, w, nil
}

// durableStory tells what the scenario does and promises.
func durableStory(e *env) {
	e.story("One worker on an external nats-server, its model a fake provider speaking OpenAI's Chat Completions format over HTTP, received a message every 250 ms until the last kill's turn had resumed and completed.")
	e.story("Every turn's first model call asks for the publish tool (a report on ops.reports.chaos, captured by a stream with a 10-minute duplicate window); the second call, which ends the turn, is answered after 1.5 s.")
	e.story("The worker was killed with SIGKILL %d times, each while a second call was waiting (the report published, the turn not ended), and restarted at once; the next kill waited for a turn to complete after the restart.", durableKills)
	e.story("Promises checked beyond the counts: exactly one report per completed turn, and exactly one first-step model request per completed turn (a resumed turn replays its recorded steps). Recovery: from each restart to the first completed turn after it (the resumed turn, which waits for its messages' redelivery: the 5 s ack wait).")
}

// durableKillMidTurn kills w durableKills times, each while a second
// model call is in flight, restarting it at once and waiting for a turn
// to complete before the next; it returns how many kills landed so.
func durableKillMidTurn(e *env, w *service, prov *provider) (landed int, err error) {
	completed := func() int {
		_ = e.tail.Poll()
		return e.led.Turns("a1", time.Time{}, time.Now().Add(time.Hour))
	}
	for range durableKills {
		err := poll(e.ctx, 10*time.Second, 10*time.Millisecond, "a second model call in flight", func() (bool, error) {
			_, _, in := prov.Counts()
			return in > 0, nil
		})
		if err != nil {
			e.note("no second model call in flight within 10 s; that kill was skipped")
			continue
		}
		landed++
		if err := w.kill(); err != nil {
			return landed, err
		}
		before := completed()
		if err := e.start(w); err != nil {
			return landed, err
		}
		e.cleared(w.starts[len(w.starts)-1], one, "")
		if err := poll(e.ctx, 60*time.Second, 50*time.Millisecond, "a turn completed after the restart", func() (bool, error) {
			return completed() > before, nil
		}); err != nil {
			return landed, err
		}
	}
	return landed, nil
}

// durableCheck checks the side effects against the completed turns: one
// report and one first-step model request each, and a resumed turn per
// kill that landed.
func durableCheck(e *env, w *service, prov *provider, reports jetstream.Stream, landed int) error {
	if err := e.tail.Poll(); err != nil {
		return err
	}
	info, err := reports.Info(e.ctx)
	if err != nil {
		return err
	}
	turns := e.led.Turns("a1", time.Time{}, time.Now().Add(time.Hour))
	first, second, _ := prov.Counts()
	resumed := 0
	if b, err := os.ReadFile(w.log); err == nil {
		resumed = strings.Count(string(b), "turn resumes an unfinished turn")
	}
	e.note("%d kill(s) landed between a report and its turn's end; %d turn(s) resumed from their journals", landed, resumed)
	e.note("%d completed turns, %d reports on the stream, %d first-step and %d second-step model requests", turns, info.State.Msgs, first, second)
	if int(info.State.Msgs) != turns {
		e.broken("%d reports for %d completed turns: a side effect was repeated or lost", info.State.Msgs, turns)
	}
	if first != turns {
		e.broken("%d first-step model requests for %d completed turns: a recorded step was asked again", first, turns)
	}
	if resumed < landed {
		e.broken("%d kill(s) landed mid-turn but only %d turn(s) resumed", landed, resumed)
	}
	return nil
}
