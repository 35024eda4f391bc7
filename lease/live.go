package lease

import "context"

// Live reports whether the replica named holder runs: its replica record
// is in the store and has not expired. A replica that stopped cleanly
// deleted its record; one that died lets it expire within the TTL. An
// error says the store could not tell; the caller must then not take the
// replica as gone.
func (m *Manager) Live(ctx context.Context, holder string) (bool, error) {
	now := m.o.Clock.Now()
	until, err := m.liveUntil(ctx, holder, now)
	if err != nil {
		return false, err
	}
	return now.Before(until), nil
}
