package tools

import (
	"context"
	"slices"
	"testing"

	"github.com/agent-worker/agent-worker/config"
)

type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, string, []byte, string) error { return nil }

type nopSpawner struct{}

func (nopSpawner) Spawn(context.Context, string, string) (string, error) { return "", nil }
func (nopSpawner) Stop(string) error                                     { return nil }

// Every tool name config accepts (config.KnownTools, which validate
// checks a config's tools: lists against) builds, with the environment the
// worker gives it, and Build knows no tool config would refuse: the two
// lists cannot drift apart unnoticed.
func TestEveryKnownToolBuilds(t *testing.T) {
	t.Parallel()
	env := Env{Agent: "a", Publisher: nopPublisher{}, PublishAllow: []string{"ops.>"}, Spawner: nopSpawner{}, HTTPAllow: []string{"https://status.example.com/"}}
	ts, err := Build(config.KnownTools, env)
	if err != nil {
		t.Fatalf("Build(config.KnownTools): %v", err)
	}
	var names []string
	for _, tl := range ts {
		names = append(names, tl.Name())
	}
	if !slices.Equal(names, config.KnownTools) {
		t.Fatalf("built %v, want %v", names, config.KnownTools)
	}
	for _, n := range []string{ScheduleNextTurn, ReportDone, Publish, HTTPGet, SpawnSubagent, StopSubagent} {
		if !slices.Contains(config.KnownTools, n) {
			t.Errorf("tool %q builds but config.KnownTools refuses it", n)
		}
	}
}
