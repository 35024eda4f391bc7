package guard

import "testing"

// The refusal states the real shortfall, in the one money format: a
// $0.00002 excess is not "at least $0.0100", and an exact hit asks for any
// budget at all.
func TestRefusedErrorStatesTheShortfall(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		spent, ceiling float64
		want           string
	}{
		{0.00012, 0.0001, "reset of daily_usd refused: spent $0.00012 against a ceiling of $0.0001 would trip again at once; $0.00002 over it: add more than $0.00002 (e.g. $0.01)"},
		{2.5, 1, "reset of daily_usd refused: spent $2.50 against a ceiling of $1 would trip again at once; $1.50 over it: add more than $1.50 (e.g. $1.51)"},
		{2, 2, "reset of daily_usd refused: spent $2 against a ceiling of $2 would trip again at once; add any budget (e.g. $0.01)"},
	} {
		e := &RefusedError{Guardrail: Daily, Spent: c.spent, Ceiling: c.ceiling, MinAddUSD: roundUpCents(c.spent - c.ceiling)}
		if got := e.Error(); got != c.want {
			t.Errorf("spent %v, ceiling %v:\n got %s\nwant %s", c.spent, c.ceiling, got, c.want)
		}
	}
}
