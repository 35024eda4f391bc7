package memory_test

import (
	"context"
	"fmt"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/memory"
	"github.com/agent-worker/agent-worker/models/scripted"
)

// Three turns leave the window one after another and are folded into the
// memory, here by the scripted model's deterministic summariser with a
// small max_tokens: the first note stays, the newest follow, and those in
// between are counted once space runs out.
func ExampleSummariser_Fold() {
	m, _ := scripted.New("summariser", config.Model{Provider: "scripted", Behaviour: scripted.BehaviourDemo})
	s := memory.Summariser{Agent: "oncall", Model: m, MaxTokens: 80}
	notes := ""
	for n, alert := range []string{"disk full on db-1", "db-1 back to 40% used", "replica lag on db-2"} {
		f, err := s.Fold(context.Background(), notes, []memory.Turn{turnOf(uint64(n+1), alert, "Looked into it.")})
		if err != nil {
			fmt.Println(err)
			return
		}
		notes = f.Text
	}
	fmt.Println(notes)
	fmt.Println(memory.Tokens(notes) <= 80)
	// Output:
	// - turn 1: Woke for: inbox. Received 1 message(s): "disk full on db-1". I said: "Looked into it." Tools: schedule_next_turn.
	// - …and 1 more turn, details dropped for space
	// - turn 3: Woke for: inbox. Received 1 message(s): "replica lag on db-2". I said: "Looked into it." Tools: schedule_next_turn.
	// true
}
