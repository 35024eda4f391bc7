// Command chaos runs black-box fault scenarios against a built
// agent-worker binary, with real nats-server and redis-server processes,
// all on 127.0.0.1. Each scenario publishes numbered messages through
// JetStream and reads the workers' JSON logs to account for every one:
// handled by a completed turn, handled by two or more, dead-lettered (and
// why), or lost. It prints a table and writes it, with a paragraph per
// scenario, to a Markdown file.
//
//	go run ./chaos -bin bin/agent-worker -nats-server bin/nats-server -out docs/RELIABILITY.md [-run REGEX]
//
// With -soak it runs the soak instead (soak.go; SOAK_SEED, SOAK_DURATION
// and SOAK_STORE choose it): three replicas under a steady load and a
// random fault every 20–40 s, every delivery accounted at the end. It
// writes its own section of the report and keeps the rest; the scenarios
// keep the soak's section when they rewrite the report.
//
// Guarantees: every wait has a deadline, the run as a whole is bounded by
// -timeout, and every process the harness started is killed before it
// exits, on failure and on Ctrl-C too (and by the kernel, should the
// harness itself be killed). The exit status is 1 when a scenario lost,
// double-handled or dead-lettered a message (all messages it sends are
// valid) or could not be run, 2 for bad flags, else 0; the table is
// written first in every case.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

func main() { os.Exit(run()) }

func run() int {
	o, ok := parseFlags()
	if !ok {
		return 2
	}
	h := &harness{reaper: newReaper(), timeout: o.each}
	if !h.findBinaries(o) {
		return 2
	}
	var err error
	if h.root, err = os.MkdirTemp("", "agent-worker-chaos-"); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	// Every replica of the run shares one seal key (seal.key_file).
	sealKeyFile = filepath.Join(h.root, "seal.key")
	if err := writeSealKey(sealKeyFile); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	keepRoot := o.keep
	if o.keep {
		fmt.Fprintln(os.Stderr, "chaos: keeping the scenarios' files in", h.root)
	}
	defer func() {
		if !keepRoot {
			os.RemoveAll(h.root)
		}
	}()
	defer h.reaper.killAll()

	if o.rev == "" {
		o.rev = revision() // now, close to when make built the binary
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.soak {
		set, err := soakSettingsFrom(os.Getenv, time.Now())
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos: soak:", err)
			return 2
		}
		limit := set.Duration + 10*time.Minute
		if o.timeoutSet {
			limit = o.total
		}
		ctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		code := soakMain(ctx, h, set, o.out, o.rev)
		if code != 0 && !keepRoot {
			keepRoot = true
			fmt.Fprintln(os.Stderr, "chaos: soak failed; keeping its files (configs, logs, data) in", h.root)
		}
		return code
	}
	ctx, cancel := context.WithTimeout(ctx, o.total)
	defer cancel()
	return scenariosMain(ctx, h, o)
}

// options are the command's flags.
type options struct {
	bin, natsBin, redisBin string
	out                    string         // the report; "" for none
	only                   *regexp.Regexp // -run
	total, each            time.Duration  // -timeout, -scenario-timeout
	timeoutSet             bool           // -timeout was given
	keep, soak             bool
	rev                    string
}

// parseFlags reads the command line; it reports false, having said why,
// when a flag is bad.
func parseFlags() (options, bool) {
	var o options
	flag.StringVar(&o.bin, "bin", "bin/agent-worker", "the agent-worker binary under test")
	flag.StringVar(&o.natsBin, "nats-server", "bin/nats-server", "the nats-server binary")
	flag.StringVar(&o.redisBin, "redis-server", "redis-server", "the redis-server binary")
	flag.StringVar(&o.out, "out", "docs/RELIABILITY.md", "the Markdown report to write (empty: none)")
	only := flag.String("run", "", "run only the scenarios whose name matches this regular expression")
	flag.DurationVar(&o.total, "timeout", 20*time.Minute, "stop everything after this long")
	flag.DurationVar(&o.each, "scenario-timeout", 3*time.Minute, "stop a scenario after this long")
	flag.BoolVar(&o.keep, "keep", false, "keep the scenarios' directories (configs, logs, data) and print where")
	flag.BoolVar(&o.soak, "soak", false, "run the soak (SOAK_SEED, SOAK_DURATION, SOAK_STORE) instead of the scenarios; -timeout then defaults to SOAK_DURATION + 10m")
	flag.StringVar(&o.rev, "rev", "", "how the report names the binary under test (default: this checkout's git revision)")
	flag.Parse()
	re, err := regexp.Compile(*only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos: -run:", err)
		return o, false
	}
	o.only = re
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "timeout" {
			o.timeoutSet = true
		}
	})
	return o, true
}

// findBinaries sets h's binaries, absolute, from o; it reports false,
// having said why, when one is missing. A soak on kv needs no
// redis-server.
func (h *harness) findBinaries(o options) bool {
	type binary struct {
		dst  *string
		path string
	}
	bins := []binary{{&h.bin, o.bin}, {&h.natsBin, o.natsBin}}
	if !o.soak || strings.TrimSpace(os.Getenv("SOAK_STORE")) != storeKV {
		bins = append(bins, binary{&h.redisBin, o.redisBin}) // a soak on kv needs none
	}
	for _, b := range bins {
		p, err := exec.LookPath(b.path)
		if err == nil {
			p, err = filepath.Abs(p)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "chaos: %s: %v (see the Makefile's chaos target)\n", b.path, err)
			return false
		}
		*b.dst = p
	}
	return true
}

// scenariosMain runs the scenarios o selects, prints their table and
// writes the report (when o.out is set); it returns the exit status.
func scenariosMain(ctx context.Context, h *harness, o options) int {
	began := time.Now()
	var results []*Result
	for i, s := range scenarios {
		if !o.only.MatchString(s.name) {
			continue
		}
		fmt.Fprintf(os.Stderr, "chaos: %d. %s: %s ...\n", i+1, s.name, s.title)
		r := h.run(ctx, s, i+1)
		results = append(results, r)
		fmt.Fprintf(os.Stderr, "chaos: %s: %s in %s\n", s.name, verdict(r), secs(r.Elapsed))
		if r.Err != nil {
			fmt.Fprintf(os.Stderr, "chaos: %s: %v\n", s.name, r.Err)
		}
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "chaos: stopping:", context.Cause(ctx))
			break
		}
	}
	h.reaper.killAll()
	elapsed := time.Since(began)

	fmt.Print(table(results))
	fmt.Printf("\n%d scenario(s) in %s\n", len(results), secs(elapsed))
	if o.out != "" {
		err := os.MkdirAll(filepath.Dir(o.out), 0o755)
		if err == nil {
			err = os.WriteFile(o.out, []byte(withSoak(markdown(results, elapsed, o.rev), readIfThere(o.out))), 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			return 1
		}
		fmt.Println("wrote", o.out)
	}
	failed := 0
	for _, r := range results {
		if r.Failed() {
			failed++
		}
	}
	if failed > 0 || ctx.Err() != nil || len(results) == 0 {
		fmt.Fprintf(os.Stderr, "chaos: %d of %d scenario(s) failed\n", failed, len(results))
		return 1
	}
	return 0
}

// soakMain runs the soak, prints its tables and writes them into the
// report at out (when set); it returns the exit status.
func soakMain(ctx context.Context, h *harness, set soakSettings, out, rev string) int {
	fmt.Fprintf(os.Stderr, "soak: seed %d (SOAK_SEED=%d repeats its faults), store %s, %s of load and faults\n", set.Seed, set.Seed, set.Store, set.Duration)
	r := runSoak(ctx, h, set)
	r.Rev = rev
	h.reaper.killAll()
	fmt.Print(r.terminal())
	if out != "" {
		err := os.MkdirAll(filepath.Dir(out), 0o755)
		if err == nil {
			err = os.WriteFile(out, []byte(spliceSoak(readIfThere(out), set.Store, r.markdown())), 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos: soak:", err)
			return 1
		}
		fmt.Println("wrote", out)
	}
	if r.Failed() {
		fmt.Fprintf(os.Stderr, "soak: FAILED (seed %d): %s\n", set.Seed, strings.Join(r.failures(), ", "))
		return 1
	}
	return 0
}

// readIfThere returns the file at path, "" when it cannot be read.
func readIfThere(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}
