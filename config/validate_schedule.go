package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// cronParser accepts what the scheduler accepts: five fields, an optional
// leading seconds field, or a descriptor ("@daily", "@every 10m").
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// schedule checks one schedule; names holds the agent's schedule names
// seen so far.
func (v *validator) schedule(p path, s Schedule, names map[string]int, i int) {
	switch first, dup := names[s.Name]; {
	case s.Name == "":
		v.at(p.key("name"), "required")
	case !namePattern.MatchString(s.Name):
		v.at(p.key("name"), "%q must match %s: schedule names are API path segments and metric labels", s.Name, namePattern)
	case dup:
		v.at(p.key("name"), "duplicate schedule name %q (also schedules[%d])", s.Name, first)
	default:
		names[s.Name] = i
	}

	if s.Cron == "" {
		v.at(p.key("cron"), "required")
	} else if _, err := cronParser.Parse(s.Cron); err != nil {
		v.at(p.key("cron"), "bad cron %q: %v", s.Cron, err)
	} else if err := checkCronSteps(s.Cron); err != nil {
		v.at(p.key("cron"), "bad cron %q: %v", s.Cron, err)
	}

	if _, err := time.LoadLocation(s.Timezone); err != nil {
		v.at(p.key("timezone"), "bad timezone %q: %v", s.Timezone, err)
	}
	v.oneOf(p.key("overlap"), s.Overlap, overlapPolicies)
	v.duration(p.key("jitter"), s.Jitter)
}

// checkCronSteps rejects specs robfig/cron accepts but that cannot be
// meant: "*/61" in the minute field silently fires once an hour, at :00,
// and "@every -1s" fires every second.
func checkCronSteps(spec string) error {
	fields := strings.Fields(spec)
	if len(fields) > 0 && (strings.HasPrefix(fields[0], "TZ=") || strings.HasPrefix(fields[0], "CRON_TZ=")) {
		fields = fields[1:]
	}
	if len(fields) == 2 && fields[0] == "@every" {
		// cron rounds a delay below one second up to one second.
		if d, err := time.ParseDuration(fields[1]); err == nil && d < time.Second {
			return fmt.Errorf("@every needs at least 1s; got %s", fields[1])
		}
	}
	if len(fields) == 0 || strings.HasPrefix(fields[0], "@") {
		return nil
	}
	type bound struct {
		name   string
		lo, hi int
	}
	bounds := []bound{{"minute", 0, 59}, {"hour", 0, 23}, {"day-of-month", 1, 31}, {"month", 1, 12}, {"day-of-week", 0, 6}}
	if len(fields) == 6 {
		bounds = append([]bound{{"second", 0, 59}}, bounds...)
	}
	for i, f := range fields[:min(len(fields), len(bounds))] {
		for part := range strings.SplitSeq(f, ",") {
			_, step, ok := strings.Cut(part, "/")
			if !ok {
				continue
			}
			n, err := strconv.Atoi(step)
			if b := bounds[i]; err == nil && n > b.hi-b.lo {
				return fmt.Errorf("%s field %q: step %d exceeds %d", b.name, f, n, b.hi-b.lo)
			}
		}
	}
	return nil
}
