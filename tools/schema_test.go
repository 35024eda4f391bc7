package tools

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"google.golang.org/genai"
)

// Every agent's built-in tools declare the same schemas, inferred once and
// shared (not rebuilt per agent), and building and using them for many
// agents at once changes none (run with -race).
func TestToolSchemasAreSharedAndUnchanged(t *testing.T) {
	t.Parallel()
	type declarer interface {
		Declaration() *genai.FunctionDeclaration
	}
	const agents = 16
	decls := make([][]*genai.FunctionDeclaration, agents)
	var wg sync.WaitGroup
	for i := range agents {
		wg.Go(func() {
			ts, err := Build([]string{ScheduleNextTurn, ReportDone}, Env{})
			if err != nil {
				t.Error(err)
				return
			}
			for _, tl := range ts {
				d := tl.(declarer).Declaration()
				if _, err := json.Marshal(d.ParametersJsonSchema); err != nil {
					t.Error(err)
				}
				decls[i] = append(decls[i], d)
			}
		})
	}
	wg.Wait()
	want, err := jsonschema.For[ScheduleArgs](nil)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := json.Marshal(want)
	for i := range agents {
		if decls[i][0].ParametersJsonSchema != decls[0][0].ParametersJsonSchema || decls[i][1].ResponseJsonSchema != decls[0][1].ResponseJsonSchema {
			t.Fatalf("agent %d's tools have schemas of their own", i)
		}
	}
	if got, _ := json.Marshal(decls[0][0].ParametersJsonSchema); string(got) != string(wantJSON) {
		t.Fatalf("schedule_next_turn's parameters\n%s\nwant what ADK infers\n%s", got, wantJSON)
	}
}
