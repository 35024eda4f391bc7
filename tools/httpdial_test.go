package tools

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/tools/urlprefix"
)

func TestClassifyAddresses(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"8.8.8.8":                "",
		"1.1.1.1":                "",
		"2606:4700::1111":        "",
		"172.32.0.1":             "",
		"100.128.0.1":            "",
		"127.0.0.1":              "a loopback address",
		"127.255.0.9":            "a loopback address",
		"::1":                    "a loopback address",
		"::ffff:127.0.0.1":       "a loopback address",
		"64:ff9b::7f00:1":        "a loopback address",
		"10.1.2.3":               "a private address",
		"172.16.0.1":             "a private address",
		"172.31.255.255":         "a private address",
		"192.168.1.1":            "a private address",
		"fd12::1":                "a private address",
		"::ffff:10.0.0.1":        "a private address",
		"100.64.0.1":             "a carrier-grade NAT (shared) address",
		"100.127.255.254":        "a carrier-grade NAT (shared) address",
		"169.254.169.254":        "a link-local address",
		"::ffff:169.254.169.254": "a link-local address",
		"fe80::1":                "a link-local address",
		"fe80::1%eth0":           "a link-local address",
		"fd00:ec2::254":          "a cloud metadata address",
		"100.100.100.200":        "a cloud metadata address",
		"0.0.0.0":                "an unspecified address",
		"0.1.2.3":                "an unspecified address",
		"::":                     "an unspecified address",
		"::ffff:0.0.0.0":         "an unspecified address",
		"224.0.0.1":              "a multicast address",
		"ff02::1":                "a multicast address",
		"255.255.255.255":        "a reserved address",
		"::7f00:1":               "a reserved address",
	} {
		c, special := classify(netip.MustParseAddr(addr))
		if got := c.name; got != want || special != (want != "") {
			t.Errorf("classify(%s) = %q (%v), want %q", addr, got, special, want)
		}
	}
}

// The opt-in admits loopback, private and CGNAT addresses only.
func TestAddrPolicyOptIn(t *testing.T) {
	t.Parallel()
	strict, open := newAddrPolicy(false, nil), newAddrPolicy(true, nil)
	for addr, allowedWithOptIn := range map[string]bool{
		"127.0.0.1": true, "::1": true, "10.0.0.1": true, "fd00::1": true, "100.64.0.1": true,
		"169.254.169.254": false, "fe80::1": false, "0.0.0.0": false, "::": false,
		"fd00:ec2::254": false, "100.100.100.200": false, "::ffff:169.254.169.254": false,
	} {
		a := netip.MustParseAddr(addr)
		if err := strict.check(a); err == nil {
			t.Errorf("%s allowed by default", addr)
		}
		if err := open.check(a); (err == nil) != allowedWithOptIn {
			t.Errorf("%s with the opt-in: %v", addr, err)
		}
	}
	if err := strict.check(netip.MustParseAddr("93.184.215.14")); err != nil {
		t.Errorf("public address refused: %v", err)
	}
}

// The dialer's Control checks the socket's address itself, so even a
// dial that skipped DialContext's check could not connect.
func TestAddrPolicyControlRefusesBeforeConnect(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, nil)
	p := newAddrPolicy(false, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := p.dialer.DialContext(ctx, "tcp", srv.Listener.Addr().String())
	if err == nil {
		c.Close()
		t.Fatal("the dialer connected to loopback")
	}
	var refused *addrRefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("dial error %v is not a refusal", err)
	}
}

// http_get's transport never uses a proxy, and its client cannot be
// given a transport or redirect policy that would step around the checks.
func TestHTTPGetClientHasNoProxyOrBypass(t *testing.T) {
	t.Parallel()
	allow, err := urlprefix.ParsePrefixes([]string{"https://example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := newHTTPGetClient(Env{HTTPClient: &http.Client{Timeout: time.Second}}, allow)
	if err != nil {
		t.Fatal(err)
	}
	ct, ok := c.Transport.(*checkedTransport)
	if !ok {
		t.Fatalf("transport %T", c.Transport)
	}
	if tr := ct.base.(*http.Transport); tr.Proxy != nil || tr.DialContext == nil || tr.DialTLSContext != nil {
		t.Fatal("transport has a proxy, or no checked dialer")
	}
	if c.Timeout != time.Second || c.CheckRedirect == nil {
		t.Fatalf("timeout %v, redirect check %v", c.Timeout, c.CheckRedirect != nil)
	}
	for _, h := range []*http.Client{
		{Transport: http.DefaultTransport},
		{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }},
	} {
		if _, err := newHTTPGetClient(Env{HTTPClient: h}, allow); err == nil || !strings.Contains(err.Error(), "own transport") {
			t.Errorf("client %+v accepted: %v", h, err)
		}
	}
}

// The backstop transport refuses a request whose URL was not normalised
// and checked, whoever built it.
func TestCheckedTransportRefusesUncheckedRequests(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, nil)
	allow, err := urlprefix.ParsePrefixes([]string{srv.URL + "/api/"})
	if err != nil {
		t.Fatal(err)
	}
	ct := &checkedTransport{allow: allow, base: &http.Transport{DialContext: newAddrPolicy(true, nil).DialContext}}
	for _, u := range []string{srv.URL + "/api/../secret", srv.URL + "/secret", srv.URL + "/api/%2e%2e/secret"} {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := ct.RoundTrip(req); err == nil {
			resp.Body.Close()
			t.Errorf("RoundTrip(%s) was sent", u)
		}
	}
	if n := srv.hits.Load(); n != 0 {
		t.Fatalf("unchecked requests reached the server %d times", n)
	}
}
