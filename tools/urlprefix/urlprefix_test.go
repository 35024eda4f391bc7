package urlprefix

import (
	"strings"
	"testing"
)

// Parse puts equivalent spellings into one form, refuses ambiguous
// ones, and is idempotent: what it sends parses back to what it checked.
func TestParseTargetNormalises(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://example.com":                   "http://example.com/",
		"HTTP://Example.COM:80/a":              "http://example.com/a",
		"https://example.com:443/a":            "https://example.com/a",
		"https://example.com:0443/a":           "https://example.com/a",
		"https://example.com:8443/a":           "https://example.com:8443/a",
		"http://example.com/a/./b/../c":        "http://example.com/a/c",
		"http://example.com/a/b/..":            "http://example.com/a/",
		"http://example.com/a/b/.":             "http://example.com/a/b/",
		"http://example.com/a/":                "http://example.com/a/",
		"http://example.com/a//b":              "http://example.com/a/b",
		"http://example.com/../../a":           "http://example.com/a",
		"http://example.com/%61/%2e%2e/b":      "http://example.com/b",
		"http://example.com/a%20b":             "http://example.com/a%20b",
		"http://example.com/100%25":            "http://example.com/100%25",
		"http://example.com/a?x=%2F&y=..#frag": "http://example.com/a?x=%2F&y=..",
		"http://[::FFFF:127.0.0.1]:8080/":      "http://[::ffff:127.0.0.1]:8080/",
		"http://[0:0::1]/":                     "http://[::1]/",
		"http://127.0.0.1:8080/x":              "http://127.0.0.1:8080/x",
		"http://under_score.example.com/":      "http://under_score.example.com/",
		"http://example.com/a;b=1/c":           "http://example.com/a;b=1/c",
		"http://example.com/%252541":           "http://example.com/%252541",
	} {
		tg, err := Parse(in)
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		if got := tg.String(); got != want {
			t.Errorf("Parse(%q) = %s, want %s", in, got, want)
		}
		again, err := Parse(tg.String())
		if err != nil || again != tg {
			t.Errorf("Parse(%q) is not idempotent: %+v then %+v, %v", in, tg, again, err)
		}
	}
}

func TestParseTargetRefuses(t *testing.T) {
	t.Parallel()
	for in, why := range map[string]string{
		"ftp://example.com/":                "not an http",
		"http:example.com":                  "no host",
		"http:///x":                         "no host",
		"http://user@example.com/":          "credentials",
		"http://user:pw@example.com/":       "credentials",
		"http://example.com:0/":             "bad port",
		"http://example.com:65536/":         "bad port",
		"http://example.com:/":              "empty port",
		"http://[fe80::1%25eth0]/":          "bad host",
		"http://ex\u00e4mple.com/":          "bad host",
		"http://example.com/a%2fb":          "encoded slashes",
		"http://example.com/a%2Fb":          "encoded slashes",
		"http://example.com/a%5cb":          "encoded slashes",
		`http://example.com/a\b`:            "backslashes",
		"http://example.com/a%00b":          "control characters",
		"http://example.com/%zz":            "not a valid URL",
		"http://example.com/%252e%252e/x":   "percent-encoded dot",
		"http://example.com/%25252e./x":     "percent-encoded dot",
		"http://example.com/a%252fb":        "percent-encoded dot segments or slashes",
		"http://example.com/a%255cb":        "percent-encoded dot segments or slashes",
		"http://example.com/a/..;/b":        ";parameters",
		"http://example.com/a/.;x/b":        ";parameters",
		"http://example.com/a/%2e%2e;x/b":   ";parameters",
		"http://example.com/a/%252e%252e;x": "percent-encoded dot",
	} {
		tg, err := Parse(in)
		if err == nil {
			t.Errorf("Parse(%q) = %s, want a refusal (%s)", in, tg, why)
		} else if !strings.Contains(err.Error(), why) {
			t.Errorf("Parse(%q): %v, want %q", in, err, why)
		}
	}
}

// Prefixes match on scheme, host, explicit port and whole path segments.
func TestPrefixesMatchOnNormalisedParts(t *testing.T) {
	t.Parallel()
	for prefix, cases := range map[string]map[string]bool{
		"https://example.com/api": {
			"https://example.com/api":          true,
			"https://example.com/api/":         true,
			"https://example.com/api/x":        true,
			"https://EXAMPLE.com:443/api/x":    true,
			"https://example.com/x/../api/y":   true,
			"https://example.com/apix":         false,
			"https://example.com/api/../apix":  false,
			"http://example.com/api":           false,
			"https://example.com:8443/api":     false,
			"https://example.com.evil/api":     false,
			"https://evil.com/example.com/api": false,
		},
		"https://example.com:443/api/": {
			"https://example.com/api/x": true,
			"https://example.com/api/":  true,
			"https://example.com/api":   false,
			"https://example.com/apix":  false,
		},
		"http://example.com:80": {
			"http://example.com":          true,
			"http://example.com/anything": true,
			"http://example.com:8080/":    false,
		},
		"http://[::1]:8080/x/": {
			"http://[0::1]:8080/x/y": true,
			"http://[::1]/x/y":       false,
		},
	} {
		ps, err := ParsePrefixes([]string{prefix})
		if err != nil {
			t.Fatalf("prefix %q: %v", prefix, err)
		}
		for u, want := range cases {
			tg, err := Parse(u)
			if err != nil {
				t.Fatalf("Parse(%q): %v", u, err)
			}
			if got := ps.Allows(tg); got != want {
				t.Errorf("prefix %s allows %s = %v, want %v", prefix, u, got, want)
			}
		}
	}
}
