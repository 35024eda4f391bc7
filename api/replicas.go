package api

import (
	"net/http"
	"slices"
	"time"
)

// The replicas route:
//
//	route              role          answer
//	GET  /v1/replicas  read|operate  ReplicaList: the live replicas as this one sees them
//
// Replicas that share a NATS know each other by heartbeats (package
// membership). This is the answering replica's view of them: another
// replica's view may differ for a heartbeat interval or three while one
// joins, leaves or dies.

// Replica is one live replica.
type Replica struct {
	// Name is its lease holder name: the owner named in agent views.
	Name string `json:"name"`
	// Self marks the replica that answered.
	Self    bool      `json:"self,omitempty"`
	Started time.Time `json:"started,omitzero"`
	// LastSeen is when its last heartbeat arrived (other replicas only).
	LastSeen *time.Time `json:"last_seen,omitempty"`
	// AgentsOwned counts the agents it owns, Agents names those the
	// caller may see.
	AgentsOwned int      `json:"agents_owned"`
	Agents      []string `json:"agents"`
	// Unconfirmed, on the answering replica only, names the agents whose
	// leases it holds but has not renewed in time (cut off from the
	// store): another replica may own them by now, so they are not in
	// Agents.
	Unconfirmed []string `json:"agents_unconfirmed,omitempty"`
}

// ReplicaList is the answer of GET /v1/replicas.
type ReplicaList struct {
	ServedBy string    `json:"served_by,omitempty"`
	Replicas []Replica `json:"replicas"`
}

// listReplicas serves GET /v1/replicas.
func (s *Server) listReplicas(w http.ResponseWriter, r *http.Request) {
	var reps []Replica
	if s.o.Replicas != nil {
		reps = s.o.Replicas()
	} else {
		self := Replica{Name: s.o.Holder, Self: true}
		for _, a := range s.driver.Agents() {
			if !a.Standby() {
				self.Agents = append(self.Agents, a.Name())
			}
		}
		reps = []Replica{self}
	}
	who := record(r).who
	out := ReplicaList{ServedBy: s.o.Holder, Replicas: make([]Replica, 0, len(reps))}
	for _, rep := range reps {
		rep.AgentsOwned = max(rep.AgentsOwned, len(rep.Agents))
		rep.Agents = slices.DeleteFunc(slices.Clone(rep.Agents), func(a string) bool { return !who.MayAccess(a) })
		rep.Unconfirmed = slices.DeleteFunc(slices.Clone(rep.Unconfirmed), func(a string) bool { return !who.MayAccess(a) })
		if rep.Agents == nil {
			rep.Agents = []string{}
		}
		out.Replicas = append(out.Replicas, rep)
	}
	writeJSON(w, http.StatusOK, out)
}
