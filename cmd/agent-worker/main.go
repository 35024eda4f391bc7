// Command agent-worker runs LLM agents unattended: each sleeps until a
// message, schedule, timer or operator wakes it, runs one turn, and sleeps
// again. See README.md.
package main

import (
	"context"
	"os"
	_ "time/tzdata" // schedules name IANA zones; containers may lack them
)

func main() {
	env := processEnviron()
	env.ownsProcess = true
	os.Exit(executeIn(context.Background(), env, os.Args[1:], os.Stdout, os.Stderr))
}
