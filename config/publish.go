package config

import (
	"fmt"
	"strings"

	"github.com/agent-worker/agent-worker/natsbus/subject"
)

// publishable refuses a publish pattern some subject of which is internal
// to the worker (subject.Internal under nats.subject_prefix): with it the
// model could rewrite its own approvals and spend in $KV, send or answer
// operator verbs, or forge events. The publish tool refuses such subjects
// at run time too; this says so before the worker starts.
func (v *validator) publishable(c *Config, p path, pattern string) {
	if pattern == "" || strings.ContainsAny(pattern, " \t\r\n") {
		return // refused as a subject
	}
	hits := subject.Reaches(pattern, c.NATS.SubjectPrefix)
	if len(hits) == 0 {
		return
	}
	reach := hits[0].What
	if more := hits[1:]; len(more) > 0 {
		ps := make([]string, len(more))
		for i, r := range more {
			ps[i] = r.Pattern
		}
		reach += fmt.Sprintf(" and %d more internal subject spaces: %s", len(more), strings.Join(ps, ", "))
	}
	hint := ""
	prefix := c.NATS.SubjectPrefix
	if prefix == "" {
		prefix = subject.DefaultPrefix
	}
	if inbox, deferred := prefix+".*.inbox", prefix+".*.deferred"; subject.Overlap(pattern, inbox) || subject.Overlap(pattern, deferred) {
		hint = fmt.Sprintf("; to message other agents use %s or %s", inbox, deferred)
	}
	v.at(p, "%q reaches %s; publish may not write the worker's own state%s", pattern, reach, hint)
}
