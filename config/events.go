package config

import (
	"strings"
	"time"

	"github.com/agent-worker/agent-worker/natsbus/subject"
)

// Events configures the durable events stream: with nats.jetstream (the
// default) every replica stores its agents' events in the JetStream
// stream <nats.stream>_EVENTS, over <nats.subject_prefix>.*.events.>,
// from which the API's event streams on any replica replay and follow
// them. It keeps nats.replicas copies. In core NATS mode (nats.jetstream:
// false) there is no stream and these keys are unused: each replica's
// event streams replay from its own ring of the newest 1024 events.
type Events struct {
	// MaxAge is how long the stream keeps an event. Default 168h (7 days);
	// at least 1m.
	MaxAge Duration `yaml:"max_age"`
	// MaxBytes bounds the stream's size: beyond it the oldest events are
	// removed, however young. Default 268435456 (256 MiB); at least
	// 1048576 (1 MiB).
	MaxBytes int64 `yaml:"max_bytes"`
}

// Limits of the events section.
const (
	DefaultEventsMaxAge   = 7 * 24 * time.Hour
	DefaultEventsMaxBytes = 256 << 20
	minEventsMaxAge       = time.Minute
	minEventsMaxBytes     = 1 << 20
)

// applyEventsDefaults fills the events section's unset keys.
func applyEventsDefaults(e *Events) {
	setDuration(&e.MaxAge, DefaultEventsMaxAge)
	if e.MaxBytes == 0 {
		e.MaxBytes = DefaultEventsMaxBytes
	}
}

// events checks the events section and that no bound subject overlaps the
// event subjects, which the events stream captures (JetStream lets no two
// streams hold a subject, and an agent bound to its own events would wake
// itself).
func (v *validator) events(c *Config) {
	var root path
	p := root.key("events")
	switch age := c.Events.MaxAge.D(); {
	case age < 0:
		v.duration(p.key("max_age"), c.Events.MaxAge)
	case age < minEventsMaxAge:
		v.at(p.key("max_age"), "must be at least %v (a client must be able to resume a stream a moment later); got %v", minEventsMaxAge, age)
	}
	if c.Events.MaxBytes < minEventsMaxBytes {
		v.at(p.key("max_bytes"), "must be at least %d (1 MiB); got %d", minEventsMaxBytes, c.Events.MaxBytes)
	}
	if c.NATS.JetStream != nil && !*c.NATS.JetStream || c.NATS.SubjectPrefix == "" {
		return
	}
	eventSubjects := c.NATS.SubjectPrefix + ".*.events.>"
	for i, a := range c.Agents {
		for j, s := range a.Subscribe {
			if s.Subject == ">" || strings.HasPrefix(s.Subject, c.NATS.SubjectPrefix+".") {
				continue // under the prefix: refused as such (agent)
			}
			if s.Subject != "" && subject.Overlap(s.Subject, eventSubjects) {
				v.at(root.key("agents").index(i).key("subscribe").index(j).key("subject"),
					"%q overlaps the event subjects %s, which the events stream holds; make it disjoint", s.Subject, eventSubjects)
			}
		}
	}
}
