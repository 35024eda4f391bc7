package tools

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// Resolver resolves a host name to addresses; *net.Resolver is one.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// addrClass is a kind of address http_get treats specially.
type addrClass struct {
	name string
	// private classes are allowed with Env.HTTPAllowPrivate; the others
	// are refused always.
	private bool
}

var (
	classLoopback    = addrClass{"a loopback address", true}
	classPrivate     = addrClass{"a private address", true}
	classShared      = addrClass{"a carrier-grade NAT (shared) address", true}
	classLinkLocal   = addrClass{"a link-local address", false}
	classMetadata    = addrClass{"a cloud metadata address", false}
	classUnspecified = addrClass{"an unspecified address", false}
	classMulticast   = addrClass{"a multicast address", false}
	classReserved    = addrClass{"a reserved address", false}
)

// addrClasses is checked in order; the first prefix containing an
// address gives its class. Addresses in none are public.
var addrClasses = []struct {
	prefix netip.Prefix
	class  addrClass
}{
	// Cloud metadata services outside link-local space: AWS over IPv6
	// (inside fc00::/7) and Alibaba Cloud (inside 100.64/10). The usual
	// 169.254.169.254 (AWS, GCP, Azure, OCI) is link-local.
	{netip.MustParsePrefix("fd00:ec2::254/128"), classMetadata},
	{netip.MustParsePrefix("100.100.100.200/32"), classMetadata},

	{netip.MustParsePrefix("0.0.0.0/8"), classUnspecified}, // "this network"; Linux connects 0.0.0.0 to the local host
	{netip.MustParsePrefix("::/128"), classUnspecified},
	{netip.MustParsePrefix("127.0.0.0/8"), classLoopback},
	{netip.MustParsePrefix("::1/128"), classLoopback},
	{netip.MustParsePrefix("169.254.0.0/16"), classLinkLocal},
	{netip.MustParsePrefix("fe80::/10"), classLinkLocal},
	{netip.MustParsePrefix("10.0.0.0/8"), classPrivate},
	{netip.MustParsePrefix("172.16.0.0/12"), classPrivate},
	{netip.MustParsePrefix("192.168.0.0/16"), classPrivate},
	{netip.MustParsePrefix("fc00::/7"), classPrivate},
	{netip.MustParsePrefix("fec0::/10"), classPrivate}, // deprecated site-local
	{netip.MustParsePrefix("100.64.0.0/10"), classShared},
	{netip.MustParsePrefix("224.0.0.0/4"), classMulticast},
	{netip.MustParsePrefix("ff00::/8"), classMulticast},
	{netip.MustParsePrefix("240.0.0.0/4"), classReserved}, // 255.255.255.255 among them
	{netip.MustParsePrefix("::/96"), classReserved},       // deprecated IPv4-compatible
}

// nat64 is the well-known NAT64 prefix: 64:ff9b::a.b.c.d reaches a.b.c.d
// through a translator, so it is classed as a.b.c.d.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// classify returns an address's class, or ok false for a public address.
// IPv4-mapped (::ffff:a.b.c.d) and NAT64 forms are classed as the IPv4
// address they carry.
func classify(a netip.Addr) (addrClass, bool) {
	a = a.WithZone("").Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	for _, c := range addrClasses {
		if c.prefix.Contains(a) {
			return c.class, true
		}
	}
	return addrClass{}, false
}

// addrRefusedError is a dial http_get refused because of where it led.
type addrRefusedError struct {
	addr  netip.Addr
	class addrClass
}

func (e *addrRefusedError) Error() string {
	msg := fmt.Sprintf("refused: %s is %s", e.addr, e.class.name)
	if e.class.private {
		return msg + "; this agent may not reach private addresses"
	}
	return msg + "; http_get never reaches these, even with http_get_allow_private"
}

// addrPolicy decides which addresses http_get may connect to, and dials
// only those.
//
// Guarantees: every connection http_get opens goes to an address that
// passed check — the name is resolved once, every address it resolves
// to is checked, and the checked address itself is dialled, so a second
// DNS answer (rebinding) is never consulted; the dialer's Control checks
// the socket address again just before connect. A name with any refused
// address among its answers is refused as a whole.
//
// Not guaranteed: anything about what a permitted public address does
// next (it may itself proxy or redirect the request; redirects are
// checked separately, by the allow-list); 6to4 and Teredo addresses are
// not unwrapped (they reach a public relay, not this host's network).
type addrPolicy struct {
	allowPrivate bool
	resolver     Resolver
	dialer       *net.Dialer
}

func newAddrPolicy(allowPrivate bool, r Resolver) *addrPolicy {
	if r == nil {
		r = net.DefaultResolver
	}
	p := &addrPolicy{allowPrivate: allowPrivate, resolver: r}
	p.dialer = &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: p.control}
	return p
}

// check returns an *addrRefusedError if a may not be dialled.
func (p *addrPolicy) check(a netip.Addr) error {
	c, special := classify(a)
	if !special || c.private && p.allowPrivate {
		return nil
	}
	return &addrRefusedError{addr: a.WithZone(""), class: c}
}

// control checks the address a socket is about to connect to.
func (p *addrPolicy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refused: cannot check the address %q", address)
	}
	return p.check(ap.Addr())
}

// DialContext resolves addr's host, checks every address, and dials the
// checked addresses in turn until one connects.
func (p *addrPolicy) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{a}
	} else {
		res, err := p.resolver.LookupIPAddr(ctx, host)
		if err != nil {
			return nil, err
		}
		for _, r := range res {
			a, ok := netip.AddrFromSlice(r.IP)
			if !ok {
				return nil, fmt.Errorf("lookup %s: bad address %v", host, r.IP)
			}
			// net.IP holds IPv4 in 16 bytes; it cannot tell ::ffff:a.b.c.d
			// from a.b.c.d, and neither need we.
			ips = append(ips, a.Unmap().WithZone(r.Zone))
		}
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("lookup %s: no addresses", host)
	}
	for _, a := range ips {
		if err := p.check(a); err != nil {
			return nil, err
		}
	}
	var errs []error
	for _, a := range ips {
		c, err := p.dialer.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}
