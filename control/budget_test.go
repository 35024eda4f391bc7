package control_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/guard"
)

// TestResetOverNATSRefusesAbsurdBudgets: the reset verb on the control
// subject, as any NATS client sends it, refuses an added budget above
// guard.MaxAddBudgetUSD (1e308 twice made the ceiling +Inf) or one that
// would lift the ceiling above guard.MaxCeilingUSD with 400 naming the
// limit, like the HTTP route: the owner's guard is the one place that
// checks it.
func TestResetOverNATSRefusesAbsurdBudgets(t *testing.T) {
	t.Parallel()
	url := runNATS(t)
	a := newReplica(t, url, "replica-a", true, "alpha", "beta")
	if err := a.guard.Restore(t.Context(), "beta"); err != nil {
		t.Fatal(err)
	}
	nc := connect(t, url)
	for _, add := range []float64{1e308, 1e308, guard.MaxAddBudgetUSD + 1} {
		r, err := request(t, nc, "beta", control.Request{Verb: control.VerbReset, Guardrail: guard.Session, AddBudgetUSD: add}, deadline)
		if err != nil || r.OK || r.Status() != http.StatusBadRequest || !strings.Contains(r.Error, "at most $1000000 a reset") {
			t.Fatalf("reset adding %v over NATS: %+v, %v", add, r, err)
		}
	}
	for range 999 {
		r, err := request(t, nc, "beta", control.Request{Verb: control.VerbReset, Guardrail: guard.Session, AddBudgetUSD: guard.MaxAddBudgetUSD}, deadline)
		if err != nil || !r.OK {
			t.Fatalf("reset adding the most one may: %+v, %v", r, err)
		}
	}
	r, err := request(t, nc, "beta", control.Request{Verb: control.VerbReset, Guardrail: guard.Session, AddBudgetUSD: guard.MaxAddBudgetUSD}, deadline)
	if err != nil || r.Status() != http.StatusBadRequest || !strings.Contains(r.Error, "a ceiling may be at most $1000000000") {
		t.Fatalf("reset past the ceiling limit over NATS: %+v, %v", r, err)
	}
	if st, _ := a.guard.Status("beta"); st.Session.CeilingUSD != 1+999*guard.MaxAddBudgetUSD {
		t.Fatalf("beta's session ceiling %v", st.Session.CeilingUSD)
	}
}
