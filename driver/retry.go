package driver

import (
	"math/rand/v2"
	"time"
)

// Backoff spaces the retries of an agent's failed turns: the n-th failure
// in a row waits a random duration in [d/2, d], d = min(Max, Base·2^(n-1)),
// so replicas and agents that failed together do not retry together.
type Backoff struct {
	// Base is the ceiling of the first wait. Default 2s.
	Base time.Duration
	// Max caps every wait. Default 5m.
	Max time.Duration
}

// Defaults of a zero Backoff.
const (
	DefaultRetryBase = 2 * time.Second
	DefaultRetryMax  = 5 * time.Minute
)

// Delay returns the wait after the n-th failure in a row (n >= 1).
func (b Backoff) Delay(n int) time.Duration {
	base, ceiling := b.Base, b.Max
	if base <= 0 {
		base = DefaultRetryBase
	}
	if ceiling <= 0 {
		ceiling = DefaultRetryMax
	}
	d := base
	for i := 1; i < n && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// bucket limits turns to perHour an hour, burst of them back to back: a
// token bucket kept as the theoretical arrival time of the next turn
// (GCRA), in exact durations so a turn due at an instant runs at that
// instant. A zero perHour never limits.
type bucket struct {
	interval time.Duration // one turn's share of the hour
	slack    time.Duration // how far ahead of its share a burst may run
	tat      time.Time     // when the next turn is due at the steady rate
}

func newBucket(perHour, burst int) bucket {
	if perHour <= 0 {
		return bucket{}
	}
	interval := time.Hour / time.Duration(perHour)
	return bucket{interval: interval, slack: time.Duration(max(burst, 1)-1) * interval}
}

// take spends one turn at now, or reports when the next one may start.
func (b *bucket) take(now time.Time) (ok bool, next time.Time) {
	if b.interval == 0 {
		return true, time.Time{}
	}
	tat := b.tat
	if tat.Before(now) {
		tat = now
	}
	if ahead := tat.Sub(now); ahead > b.slack {
		return false, tat.Add(-b.slack)
	}
	b.tat = tat.Add(b.interval)
	return true, time.Time{}
}
