package guard_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// TestResetKeepsCeilingsFinite: an added budget that is not finite, is
// negative or above MaxAddBudgetUSD, or would lift any cost ceiling —
// the worker-wide one too — above MaxCeilingUSD, is refused with
// ErrBudget and changes nothing; so adding 1e308 twice, which made a
// ceiling +Inf (and every view of it fail to encode), cannot happen. The
// limits themselves may be reached.
func TestResetKeepsCeilingsFinite(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	st := memstore.New(c)
	g := guard.New(guard.Options{Store: st, Clock: c, Prices: guard.NewPrices(prices), WorkerDailyUSD: guard.MaxCeilingUSD - 1, Log: newLogger(&syncLog{})})
	g.AddAgent("a", "priced-1", guard.Limits{SessionUSD: 10, DailyUSD: 10})
	if err := g.Restore(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	for _, add := range []float64{1e308, 1e308, math.Inf(1), math.NaN(), -1, guard.MaxAddBudgetUSD + 0.01} {
		for _, guardrail := range []string{guard.Session, guard.Daily, guard.WorkerDaily} {
			if _, err := g.Reset("a", guardrail, add); !errors.Is(err, guard.ErrBudget) || !strings.Contains(err.Error(), "$1000000") {
				t.Fatalf("Reset(%s, %v): %v, want ErrBudget naming $1000000", guardrail, add, err)
			}
		}
	}
	if _, err := g.Reset("a", guard.WorkerDaily, 2); !errors.Is(err, guard.ErrBudget) || !strings.Contains(err.Error(), "at most $1000000000") {
		t.Fatalf("a worker-wide ceiling past the limit: %v", err)
	}
	if _, err := g.Reset("a", guard.WorkerDaily, 1); err != nil {
		t.Fatalf("a worker-wide ceiling up to the limit: %v", err)
	}
	res, err := g.Reset("a", guard.Session, guard.MaxAddBudgetUSD)
	if err != nil || res.CeilingUSD != 10+guard.MaxAddBudgetUSD {
		t.Fatalf("the most one reset may add: %+v, %v", res, err)
	}
	s, _ := g.Status("a")
	if _, err := json.Marshal(s); err != nil || s.Daily.CeilingUSD != 10 || s.WorkerDaily.CeilingUSD != guard.MaxCeilingUSD {
		t.Fatalf("status %+v: %v", s, err)
	}
}

// TestRestoreRepairsNonFiniteAmounts: a stored ledger holding a number
// beyond float64's range (1e999: how an infinite amount reads in JSON),
// which once failed the load — and with it the agent's restore, retried
// forever — is repaired at load and said so in a WARN line: an infinite
// spend becomes MaxCeilingUSD, so it stays over every ceiling a reset may
// set and the repair never lets the agent spend; an added budget, a
// negative infinity and a trip's numbers become 0. The trip itself stays,
// the repaired ledger is stored, and every view encodes.
func TestRestoreRepairsNonFiniteAmounts(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	st := memstore.New(c)
	ctx := context.Background()
	day := epoch.Format("2006-01-02")
	put := func(key, value string) {
		t.Helper()
		if _, err := st.Put(ctx, key, []byte(value)); err != nil {
			t.Fatal(err)
		}
	}
	put("guard.a", `{"session_spent_usd": 1e999, "session_added_usd": 1e400, "day": "`+day+`", "day_spent_usd": -1e999, "day_added_usd": 2.5,
		"trip": {"guardrail": "session_usd", "reason": "session spend reached the ceiling", "at": "2026-11-29T09:00:00Z", "spent_usd": 1e999, "ceiling_usd": 10}}`)
	put("guard._worker", `{"day": "`+day+`", "spent_usd": 3, "added_usd": -1e999}`)

	logs := &syncLog{}
	g := guard.New(guard.Options{Store: st, Clock: c, Prices: guard.NewPrices(prices), WorkerDailyUSD: 100, Log: newLogger(logs)})
	g.AddAgent("a", "priced-1", guard.Limits{SessionUSD: 10, DailyUSD: 10})
	if err := g.Restore(ctx, "a"); err != nil {
		t.Fatalf("restore of a ledger holding 1e999: %v", err)
	}
	s, _ := g.Status("a")
	if _, err := json.Marshal(s); err != nil {
		t.Fatalf("status does not encode: %v", err)
	}
	if s.Session.SpentUSD != guard.MaxCeilingUSD || s.Session.CeilingUSD != 10 || s.Daily.SpentUSD != 0 || s.Daily.CeilingUSD != 12.5 ||
		s.WorkerDaily.SpentUSD != 3 || s.WorkerDaily.CeilingUSD != 100 || s.Trip == nil || s.Trip.Guardrail != guard.Session || s.Trip.Spent != 0 {
		t.Fatalf("repaired status %+v, trip %+v", s, s.Trip)
	}
	for _, want := range []string{
		`msg="guardrail state repaired at load" agent=a key=guard.a repaired="day_spent_usd -1e999 → 0; session_added_usd 1e400 → 0; session_spent_usd 1e999 → 1e+09; trip.spent_usd 1e999 → 0"`,
		`msg="guardrail state repaired at load" agent=a key=guard._worker repaired="added_usd -1e999 → 0"`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs)
		}
	}
	// A reset cannot bring the spend under a ceiling: it stays halted.
	if _, err := g.Reset("a", guard.Session, guard.MaxAddBudgetUSD); err == nil {
		t.Fatal("a reset lifted a trip over a repaired infinite spend")
	}
	// The repaired ledger is what the store holds now.
	if err := g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if l := ledgerOf(t, st, "a"); l.SessionSpent != guard.MaxCeilingUSD {
		t.Fatalf("stored session spend %v after the repair", l.SessionSpent)
	}
}
