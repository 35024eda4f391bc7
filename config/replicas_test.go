package config

import (
	"slices"
	"testing"
)

// nats.replicas defaults to 1, takes 1, 3 or 5, and above 1 needs an
// external server (nats.url) with JetStream: each error names its line.
func TestNATSReplicas(t *testing.T) {
	t.Parallel()
	const agents = `
models: {m: {provider: scripted, script: [{text: ok}]}}
agents: [{name: a, model: m}]
`
	for _, c := range []struct {
		nats string
		want int
		errs []string
	}{
		{"nats: {}", 1, nil},
		{"nats: {replicas: 1}", 1, nil},
		{"nats: {url: nats://n1:4222, replicas: 3}", 3, nil},
		{"nats: {url: nats://n1:4222, replicas: 5}", 5, nil},
		{"nats:\n  url: nats://n1:4222\n  replicas: 2", 0,
			[]string{"config.yaml:3: nats.replicas: must be 1, 3 or 5 (an odd number of copies, so that a majority of them outlives a lost server); got 2"}},
		{"nats:\n  url: nats://n1:4222\n  replicas: 7", 0,
			[]string{"config.yaml:3: nats.replicas: must be 1, 3 or 5 (an odd number of copies, so that a majority of them outlives a lost server); got 7"}},
		{"nats:\n  url: nats://n1:4222\n  replicas: -3", 0,
			[]string{"config.yaml:3: nats.replicas: must be 1, 3 or 5 (an odd number of copies, so that a majority of them outlives a lost server); got -3"}},
		{"nats:\n  listen: 127.0.0.1:4222\n  replicas: 3", 0,
			[]string{"config.yaml:3: nats.replicas: 3 copies need a JetStream cluster of at least 3 servers, but nats.url is empty and the embedded server is a single server that holds 1; set nats.url to the cluster or nats.replicas to 1"}},
		{"nats: {replicas: 5}", 0,
			[]string{"config.yaml:1: nats.replicas: 5 copies need a JetStream cluster of at least 5 servers, but nats.url is empty and the embedded server is a single server that holds 1; set nats.url to the cluster or nats.replicas to 1"}},
		{"store: {url: \"redis://r:6379/0\"}\nnats:\n  url: nats://n1:4222\n  jetstream: false\n  replicas: 3", 0,
			[]string{"config.yaml:5: nats.replicas: copies are kept by JetStream, but nats.jetstream is false; set nats.replicas to 1 or nats.jetstream to true"}},
	} {
		cfg, errs := loadText(t, "\n"+c.nats+agents)
		if !slices.Equal(errs, c.errs) {
			t.Errorf("%q: errors\n  %q\nwant\n  %q", c.nats, errs, c.errs)
			continue
		}
		if c.errs == nil && cfg.NATS.Replicas != c.want {
			t.Errorf("%q: replicas %d, want %d", c.nats, cfg.NATS.Replicas, c.want)
		}
	}
}

// Validate on a Config built in code refuses replicas above 1 with the
// embedded server too, without a line.
func TestNATSReplicasInCode(t *testing.T) {
	t.Parallel()
	c := Default()
	if c.NATS.Replicas != 1 {
		t.Fatalf("default replicas %d, want 1", c.NATS.Replicas)
	}
	c.NATS.Replicas = 3
	got := errorLines(t, "", c.Validate())
	want := []string{"nats.replicas: 3 copies need a JetStream cluster of at least 3 servers, but nats.url is empty and the embedded server is a single server that holds 1; set nats.url to the cluster or nats.replicas to 1"}
	assertErrors(t, got, want)
	c.NATS.URL = "nats://n1:4222,nats://n2:4222,nats://n3:4222"
	if err := c.Validate(); err != nil {
		t.Fatalf("replicas 3 with nats.url: %v", err)
	}
}
