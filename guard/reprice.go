package guard

// A config reload may change the pricing table: SetPrices swaps it whole.
// A ledger keeps the price of its agent's model from when it was added
// (AddAgent): the worker adds the agents again after a new table, so
// their next turns are priced by it. A response of a fallback model is
// priced by the table in force when it is charged.

// prices is the pricing table in force.
func (g *Guard) prices() Prices { return *g.priced.Load() }

// SetPrices replaces the pricing table. Spend already charged is not
// priced again.
func (g *Guard) SetPrices(p Prices) {
	if p.table == nil {
		p = NewPrices(nil)
	}
	g.priced.Store(&p)
}
