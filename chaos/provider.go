package main

import (
	"net"
	"net/http"
	"time"

	"github.com/agent-worker/agent-worker/internal/fakeprovider"
)

// provider serves a fakeprovider (Chat Completions over HTTP) on
// 127.0.0.1 until close: every turn publishes a report on
// ops.reports.chaos, then waits secondDelay for the answer that ends it.
type provider struct {
	*fakeprovider.Provider
	URL string // base URL, ".../v1"
	srv *http.Server
}

func newProvider(secondDelay time.Duration) (*provider, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	fp := &fakeprovider.Provider{Subject: "ops.reports.chaos", Text: "report of a chaos turn", SecondDelay: secondDelay}
	p := &provider{Provider: fp, URL: "http://" + l.Addr().String() + "/v1",
		srv: &http.Server{Handler: fp, ReadHeaderTimeout: 5 * time.Second}}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

func (p *provider) close() { _ = p.srv.Close() }
