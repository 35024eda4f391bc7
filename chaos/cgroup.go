package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// cpuQuota is a cgroup that holds its processes to a share of a core with
// the CPU controller's CFS quota: quota microseconds of CPU time in every
// period of 100 ms, whatever the machine has free. It needs root and the
// cpu controller, cgroup v1 (/sys/fs/cgroup/cpu) or v2.
type cpuQuota struct {
	dir   string // the cgroup's directory
	procs string // where a pid is written to move it in
}

// cpuPeriod is the CFS period the quota is a share of, in microseconds.
const cpuPeriod = 100_000

// newCPUQuota makes a cgroup named name holding its processes to share
// of one core (0.25: a quarter).
func newCPUQuota(name string, share float64) (*cpuQuota, error) {
	quota := int(share * cpuPeriod)
	if v1 := "/sys/fs/cgroup/cpu"; exists(filepath.Join(v1, "cpu.cfs_quota_us")) {
		q := &cpuQuota{dir: filepath.Join(v1, name)}
		q.procs = filepath.Join(q.dir, "cgroup.procs")
		if err := os.Mkdir(q.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("cgroup v1 cpu %s: %w (the scenario needs root)", q.dir, err)
		}
		if err := writeFile(filepath.Join(q.dir, "cpu.cfs_period_us"), fmt.Sprint(cpuPeriod)); err != nil {
			return nil, err
		}
		return q, writeFile(filepath.Join(q.dir, "cpu.cfs_quota_us"), fmt.Sprint(quota))
	}
	root := "/sys/fs/cgroup"
	ctl, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil || !slices.Contains(strings.Fields(string(ctl)), "cpu") {
		return nil, fmt.Errorf("no cgroup cpu controller (neither /sys/fs/cgroup/cpu, v1, nor cpu in /sys/fs/cgroup/cgroup.controllers, v2): the scenario needs one, and root")
	}
	if err := writeFile(filepath.Join(root, "cgroup.subtree_control"), "+cpu"); err != nil {
		return nil, err
	}
	q := &cpuQuota{dir: filepath.Join(root, name)}
	q.procs = filepath.Join(q.dir, "cgroup.procs")
	if err := os.Mkdir(q.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup v2 %s: %w (the scenario needs root)", q.dir, err)
	}
	return q, writeFile(filepath.Join(q.dir, "cpu.max"), fmt.Sprintf("%d %d", quota, cpuPeriod))
}

// wrap returns argv run inside the cgroup from its first instruction: a
// shell moves itself in, then execs argv.
func (q *cpuQuota) wrap(argv []string) []string {
	return append([]string{"/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, q.procs}, argv...)
}

// throttled reads how long the cgroup's processes were held back, as
// the kernel counts it (cpu.stat): "12.3 s throttled in 410 of 520
// periods", or "" when it cannot tell.
func (q *cpuQuota) throttled() string {
	data, err := os.ReadFile(filepath.Join(q.dir, "cpu.stat"))
	if err != nil {
		return ""
	}
	v := map[string]int64{}
	for line := range strings.Lines(string(data)) {
		var k string
		var n int64
		if _, err := fmt.Sscan(line, &k, &n); err == nil {
			v[k] = n
		}
	}
	switch {
	case v["nr_periods"] == 0:
		return ""
	case v["throttled_usec"] > 0: // v2
		return fmt.Sprintf("%.1f s throttled in %d of %d periods", float64(v["throttled_usec"])/1e6, v["nr_throttled"], v["nr_periods"])
	}
	return fmt.Sprintf("%.1f s throttled in %d of %d periods", float64(v["throttled_time"])/1e9, v["nr_throttled"], v["nr_periods"]) // v1: ns
}

// add moves the process pid (all its threads) into the cgroup.
func (q *cpuQuota) add(pid int) error { return writeFile(q.procs, fmt.Sprint(pid)) }

// release moves the process pid back to the hierarchy's root: no quota.
// A process that has ended meanwhile is not an error.
func (q *cpuQuota) release(pid int) error {
	err := writeFile(filepath.Join(filepath.Dir(q.dir), "cgroup.procs"), fmt.Sprint(pid))
	if err != nil && errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// remove removes the cgroup, once no process is in it.
func (q *cpuQuota) remove() error { return os.Remove(q.dir) }

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

func writeFile(path, s string) error {
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		return fmt.Errorf("cgroup: write %q to %s: %w", s, path, err)
	}
	return nil
}
