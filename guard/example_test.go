package guard_test

import (
	"context"
	"fmt"

	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// A daily ceiling of $2, crossed by $0.50: a reset without budget would
// trip again at once, so it is refused with the numbers; one that adds
// more than the shortfall lifts the trip. Spend is never lowered.
func Example_resetRefused() {
	g := guard.New(guard.Options{Store: memstore.New(nil)})
	g.AddAgent("oncall", "gpt-4.1-mini", guard.Limits{DailyUSD: 2})
	if err := g.Restore(context.Background(), "oncall"); err != nil {
		panic(err)
	}
	g.Charge("oncall", 2.5)
	st, _ := g.Status("oncall")
	fmt.Println("tripped:", st.Trip.Guardrail)

	_, err := g.Reset("oncall", "daily_usd", 0)
	fmt.Println(err)

	r, err := g.Reset("oncall", "daily_usd", 1)
	fmt.Printf("cleared %v: spent $%.2f of $%.2f (err %v)\n", r.Cleared, r.SpentUSD, r.CeilingUSD, err)
	// Output:
	// tripped: daily_usd
	// reset of daily_usd refused: spent $2.50 against a ceiling of $2 would trip again at once; $0.50 over it: add more than $0.50 (e.g. $0.51)
	// cleared true: spent $2.50 of $3.00 (err <nil>)
}
