package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/adk/tool"
	"google.golang.org/adk/tool/functiontool"
)

// Tool names for background subagents.
const (
	SpawnSubagent = "spawn_subagent"
	StopSubagent  = "stop_subagent"
)

// Spawner starts and stops an agent's background subagents.
type Spawner interface {
	// Spawn starts a subagent on task and returns its id; it refuses
	// beyond the agent's caps with an error the model may read. key (the
	// call's action id; "" for none) makes it idempotent: a second spawn
	// under the same key returns the first's id and starts nothing.
	// ctx is the spawning tool call's: the subagent's run links to its
	// trace.
	Spawn(ctx context.Context, task, key string) (id string, err error)
	// Stop stops a running subagent of this agent.
	Stop(id string) error
}

// SpawnArgs are spawn_subagent's arguments.
type SpawnArgs struct {
	Task string `json:"task" jsonschema:"the whole task for the subagent: it sees nothing else of this conversation"`
}

// SpawnResult is what the model is told.
type SpawnResult struct {
	ID   string `json:"id"`
	Note string `json:"note"`
}

// StopArgs are stop_subagent's arguments.
type StopArgs struct {
	ID string `json:"id" jsonschema:"the id spawn_subagent returned"`
}

// StopResult is what the model is told.
type StopResult struct {
	Stopped bool `json:"stopped"`
}

func newSpawnSubagent(s Spawner, h Host) (tool.Tool, error) {
	if s == nil {
		return nil, errors.New("no subagent manager is available to this worker")
	}
	return newTool(functiontool.Config{
		Name: SpawnSubagent,
		Description: "Start a background subagent on a self-contained task. It runs while you sleep; " +
			"its result arrives later as a message in your inbox and wakes you. Do not wait for it in this turn.",
	}, func(ctx tool.Context, a SpawnArgs) (SpawnResult, error) {
		if strings.TrimSpace(a.Task) == "" {
			return SpawnResult{}, errors.New("task is required")
		}
		key := ""
		if h != nil {
			key = h.ActionID(ctx.FunctionCallID())
		}
		id, err := s.Spawn(ctx, a.Task, key)
		if err != nil {
			return SpawnResult{}, err
		}
		return SpawnResult{ID: id, Note: fmt.Sprintf("subagent %s started; its report will arrive in your inbox", id)}, nil
	})
}

func newStopSubagent(s Spawner) (tool.Tool, error) {
	if s == nil {
		return nil, errors.New("no subagent manager is available to this worker")
	}
	return newTool(functiontool.Config{
		Name:        StopSubagent,
		Description: "Stop a background subagent you started, by its id.",
	}, func(_ tool.Context, a StopArgs) (StopResult, error) {
		if err := s.Stop(a.ID); err != nil {
			return StopResult{}, err
		}
		return StopResult{Stopped: true}, nil
	})
}
