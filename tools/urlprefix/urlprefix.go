// Package urlprefix puts http(s) URLs into one normal form and matches
// them against allowed prefixes on whole path segments: what http_get
// checks, what it fetches, and what validate accepts as a prefix are the
// same thing. It knows nothing of addresses or DNS (the tool's dialer
// checks those) and must not fetch anything.
package urlprefix

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// Target is an http(s) URL in the one form http_get both checks and
// fetches. Two spellings of the same resource normalise to the same
// target, so an allow-list match on the target is a match on what the
// server will be asked for.
//
// Guarantees, for a target returned by Parse:
//   - scheme is "http" or "https"; there are no credentials or fragment;
//   - host is a lower-cased DNS name ([a-z0-9-_.]) or a canonical IP
//     literal (no zone), and port is explicit ("80", "443" by default);
//   - path is decoded exactly once, starts with "/", has no "." or ".."
//     segment (resolved like path.Clean, keeping a trailing slash), no
//     empty segment, no backslash, no control character, and no segment
//     that a server decoding it again, or stripping ";params", would read
//     as a dot segment or split at a slash;
//   - URL() sends that path in Go's canonical escaping, and parsing
//     URL().String() again yields the same target.
//
// Not guaranteed: that a server maps the path to resources the way the
// prefix suggests (a server may alias paths, follow symlinks, or case-
// fold); that the host name means one fixed machine (DNS is checked at
// dial time by the address policy, not here); IDNA (non-ASCII host
// names are refused, not converted).
type Target struct {
	scheme string
	host   string
	port   string
	path   string
	query  string // raw, as given; never part of a match
}

// Parse normalises raw, or says why it will not.
func Parse(raw string) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Target{}, errors.New("not a valid URL")
	}
	var t Target
	switch t.scheme = strings.ToLower(u.Scheme); t.scheme {
	case "http":
		t.port = "80"
	case "https":
		t.port = "443"
	default:
		return Target{}, errors.New("not an http or https URL")
	}
	if u.Opaque != "" || u.Host == "" {
		return Target{}, errors.New("no host")
	}
	if u.User != nil {
		return Target{}, errors.New("URLs with credentials are not allowed")
	}
	if t.host, err = normaliseHost(u.Hostname()); err != nil {
		return Target{}, err
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Target{}, fmt.Errorf("bad port %q", p)
		}
		t.port = strconv.Itoa(n)
	} else if strings.HasSuffix(u.Host, ":") {
		return Target{}, errors.New("empty port")
	}
	// RawPath is the path exactly as written whenever it differs from
	// Go's own escaping of the decoded Path; otherwise that escaping is it.
	escaped := u.RawPath
	if escaped == "" {
		escaped = u.EscapedPath()
	}
	if t.path, err = normalisePath(escaped); err != nil {
		return Target{}, err
	}
	t.query = u.RawQuery
	return t, nil
}

// normaliseHost lower-cases a DNS name or canonicalises an IP literal.
func normaliseHost(h string) (string, error) {
	if h == "" {
		return "", errors.New("no host")
	}
	if strings.Contains(h, ":") || strings.Contains(h, "%") {
		// Only an IPv6 literal has a colon in Hostname(); a zone (%eth0)
		// names an interface, which a remote model has no business with.
		a, err := netip.ParseAddr(h)
		if err != nil || a.Zone() != "" {
			return "", fmt.Errorf("bad host %q", h)
		}
		return a.String(), nil
	}
	h = strings.ToLower(h)
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return "", fmt.Errorf("bad host %q", h)
		}
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.String(), nil
	}
	return h, nil
}

// normalisePath decodes an escaped URL path once and resolves its dot
// segments, refusing what could mean something else to a server.
func normalisePath(escaped string) (string, error) {
	lower := strings.ToLower(escaped)
	if strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c") {
		return "", errors.New("encoded slashes (%2f, %5c) are not allowed in the path")
	}
	p, err := url.PathUnescape(escaped)
	if err != nil {
		return "", errors.New("bad percent-encoding in the path")
	}
	if strings.Contains(p, `\`) {
		return "", errors.New("backslashes are not allowed in the path")
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] == 0x7f {
			return "", errors.New("control characters are not allowed in the path")
		}
	}
	if err := checkSegments(p); err != nil {
		return "", err
	}
	// A server that decodes again must not find a dot segment or a new
	// slash either; look through a few more layers of encoding.
	for d, layer := 0, p; d < 3 && strings.Contains(layer, "%"); d++ {
		next, err := url.PathUnescape(layer)
		if err != nil {
			break // not valid encoding: a second decode fails, or leaves it as is
		}
		if strings.Count(next, "/") != strings.Count(layer, "/") || strings.Contains(next, `\`) || dotSegment(next) {
			return "", errors.New("percent-encoded dot segments or slashes are not allowed in the path")
		}
		layer = next
	}
	if p == "" {
		return "/", nil
	}
	if !strings.HasPrefix(p, "/") {
		return "", errors.New("the path must start with /")
	}
	clean := path.Clean(p)
	// Keep a trailing slash's meaning: ".../x/", ".../x/." and ".../x/.."
	// all name a directory (RFC 3986 section 5.2.4).
	if clean != "/" && (strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..")) {
		clean += "/"
	}
	return clean, nil
}

// checkSegments refuses segments some servers treat as dot segments
// though path.Clean does not: "..;x" and ".;x" (Tomcat, Spring drop
// ";params" before resolving).
func checkSegments(p string) error {
	for _, seg := range strings.Split(p, "/") {
		if name, _, params := strings.Cut(seg, ";"); params && (name == "." || name == "..") {
			return errors.New("dot segments with ;parameters are not allowed in the path")
		}
	}
	return nil
}

// dotSegment reports whether p has a "." or ".." segment, with or
// without ";params".
func dotSegment(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		name, _, _ := strings.Cut(seg, ";")
		if name == "." || name == ".." {
			return true
		}
	}
	return false
}

// URL is the URL http_get sends for t: default ports are left implicit,
// the path is in canonical escaping, the query as given.
func (t Target) URL() *url.URL {
	host := t.host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if !(t.scheme == "http" && t.port == "80" || t.scheme == "https" && t.port == "443") {
		host += ":" + t.port
	}
	return &url.URL{Scheme: t.scheme, Host: host, Path: t.path, RawQuery: t.query}
}

func (t Target) String() string { return t.URL().String() }

// Prefixes is the allow-list of http_get, normalised.
type Prefixes []Target

// ParsePrefixes normalises configured prefixes like URLs; a prefix must
// be scheme://host[:port][/path], without query or fragment.
func ParsePrefixes(raw []string) (Prefixes, error) {
	var out Prefixes
	for _, r := range raw {
		u, err := url.Parse(r)
		if err == nil && (u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(r, "#")) {
			return nil, fmt.Errorf("http_get prefix %q: a prefix may not have a query or fragment", r)
		}
		t, err := Parse(r)
		if err != nil {
			return nil, fmt.Errorf("http_get prefix %q: %v", r, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// Allows reports whether t is under one of the prefixes: same scheme,
// host and port, and a path equal to the prefix's or below it at a
// segment boundary ("/api" covers "/api" and "/api/x", not "/apix";
// "/api/" covers "/api/x", not "/api").
func (ps Prefixes) Allows(t Target) bool {
	for _, p := range ps {
		if p.scheme != t.scheme || p.host != t.host || p.port != t.port {
			continue
		}
		if strings.HasSuffix(p.path, "/") {
			if strings.HasPrefix(t.path, p.path) {
				return true
			}
		} else if t.path == p.path || strings.HasPrefix(t.path, p.path+"/") {
			return true
		}
	}
	return false
}

func (ps Prefixes) String() string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
