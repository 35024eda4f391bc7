package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
)

// GET /v1/replicas (role read) lists the live replicas as the answering
// one sees them — itself first — with when each started, when it was last
// heard from and the agents it owns; a token scoped to some agents sees
// only those among them. Without a membership (one process) it is this
// replica alone with the agents it owns.
func TestReplicasRoute(t *testing.T) {
	t.Parallel()
	heard := epoch.Add(time.Minute)
	replicas := func() []api.Replica {
		return []api.Replica{
			{Name: "r1", Self: true, Started: epoch, Agents: []string{"alpha"}},
			{Name: "r2", Started: epoch, LastSeen: &heard, Agents: []string{"beta", "gamma"}},
		}
	}
	scoped := api.Token{Name: "alpha-only", Role: api.RoleRead, Value: "alpha-only-secret-1", Agents: []string{"alpha"}}
	w := newWorld(t, api.Options{Holder: "r1", Replicas: replicas, Tokens: append(tokens[:2:2], scoped)})

	var list api.ReplicaList
	r := w.get("/v1/replicas")
	w.wantStatus(r, http.StatusOK)
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	if list.ServedBy != "r1" || len(list.Replicas) != 2 || !list.Replicas[0].Self || list.Replicas[1].Name != "r2" ||
		list.Replicas[1].AgentsOwned != 2 || len(list.Replicas[1].Agents) != 2 || list.Replicas[1].LastSeen == nil {
		t.Errorf("replicas: %s", r.body)
	}

	r = w.call(http.MethodGet, "/v1/replicas", scoped.Value, "", "")
	w.wantStatus(r, http.StatusOK)
	list = api.ReplicaList{}
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Replicas) != 2 || len(list.Replicas[0].Agents) != 1 || len(list.Replicas[1].Agents) != 0 || list.Replicas[1].AgentsOwned != 2 {
		t.Errorf("a scoped token sees: %s", r.body)
	}

	one := newWorld(t, api.Options{Holder: "solo"})
	r = one.get("/v1/replicas")
	one.wantStatus(r, http.StatusOK)
	list = api.ReplicaList{}
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Replicas) != 1 || list.Replicas[0].Name != "solo" || !list.Replicas[0].Self || list.Replicas[0].AgentsOwned == 0 {
		t.Errorf("one process: %s", r.body)
	}
}
