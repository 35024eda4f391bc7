package redisstore

import (
	"crypto/tls"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Default ports: of a Redis server, and of a Sentinel.
const (
	defaultPort         = "6379"
	defaultSentinelPort = "26379"
)

// Topologies a URL can name.
const (
	single   = "single"
	sentinel = "sentinel"
	cluster  = "cluster"
)

// target is where a URL points, for log lines and error messages: it never
// holds a password.
type target struct {
	topology string
	addrs    []string
	master   string // sentinel: the monitored master's name
	db       int
	tls      bool
}

func (t target) String() string {
	addrs := strings.Join(t.addrs, ",")
	switch t.topology {
	case sentinel:
		return fmt.Sprintf("redis master %q via sentinel %s", t.master, addrs)
	case cluster:
		return "redis cluster at " + addrs
	}
	return "redis at " + addrs
}

// queryParams are the query parameters a URL may carry; anything else is
// refused, so a typo does not pass silently.
var queryParams = []string{"client_name", "dial_timeout", "pool_size", "read_timeout", "write_timeout"}

// parseURL turns a store URL (forms: Open's doc) and opts into go-redis
// options. lookupEnv reads Options.PasswordEnv and SentinelPasswordEnv.
//
// Its errors never contain a password: the URL's user info is cut off
// before anything else is looked at, and messages show the URL with it
// replaced by "***" and without its query.
func parseURL(raw string, opts Options, lookupEnv func(string) (string, bool)) (*redis.UniversalOptions, target, error) {
	u, err := splitURL(raw)
	if err != nil {
		return nil, target{}, err
	}
	tg, err := u.target()
	if err != nil {
		return nil, tg, err
	}

	o := &redis.UniversalOptions{
		Addrs:         tg.addrs,
		DB:            tg.db,
		MasterName:    tg.master,
		IsClusterMode: tg.topology == cluster,
		// Callers' contexts bound each command, so a cancelled turn or a
		// shutdown does not wait out the socket timeouts.
		ContextTimeoutEnabled: true,
	}

	if err := applyQuery(o, u.rawQuery); err != nil {
		return nil, tg, u.fail("%v", err)
	}
	if err := u.credentials(o, opts, tg, lookupEnv); err != nil {
		return nil, tg, err
	}
	if err := u.applyTLS(o, opts, tg); err != nil {
		return nil, tg, err
	}
	return o, tg, nil
}

// storeURL is a store URL cut into its parts, its user info (which holds
// the password) kept apart from what messages show.
type storeURL struct {
	scheme      string // lower case
	rest        string // hosts and path: no user info, no query
	rawQuery    string
	userinfo    string
	hasUserinfo bool
	// shown is the URL as messages show it: user info as "***", query as
	// "...".
	shown string
}

// splitURL cuts raw into its parts; its error never echoes raw.
func splitURL(raw string) (storeURL, error) {
	var u storeURL
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		// Without a scheme the input cannot be split safely: never echo it.
		return u, fmt.Errorf("store URL: want redis://, rediss://, redis+sentinel:// or redis+cluster://, got a string without \"://\"")
	}
	u.scheme = strings.ToLower(scheme)
	// The user info ends at the last '@', as in net/url, so a password
	// with an unescaped '@' is still cut off whole.
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		u.userinfo, rest, u.hasUserinfo = rest[:at], rest[at+1:], true
	}
	// Messages show the URL without its user info and query (which may
	// hold a misplaced password); errors about a query parameter name it.
	rest, rawQuery, hasQuery := strings.Cut(rest, "?")
	u.rest, u.rawQuery = rest, rawQuery
	u.shown = u.scheme + "://" + rest
	if u.hasUserinfo {
		u.shown = u.scheme + "://***@" + rest
	}
	if hasQuery {
		u.shown += "?..."
	}
	return u, nil
}

// fail is an error about u, showing it without user info and query.
func (u storeURL) fail(format string, args ...any) error {
	return fmt.Errorf("store URL %q: %s", u.shown, fmt.Sprintf(format, args...))
}

// target is where u points: its topology from the scheme, its addresses,
// and its database (and master name) from the path.
func (u storeURL) target() (target, error) {
	var tg target
	scheme := u.scheme
	switch scheme {
	case "redis", "rediss":
		tg.topology = single
	case "redis+sentinel", "rediss+sentinel":
		tg.topology = sentinel
	case "redis+cluster", "rediss+cluster":
		tg.topology = cluster
	default:
		return tg, u.fail("unknown scheme %q: want redis, rediss, redis+sentinel, rediss+sentinel, redis+cluster or rediss+cluster", scheme)
	}
	tg.tls = strings.HasPrefix(scheme, "rediss")
	if strings.Contains(u.rest, "#") || strings.Contains(u.rawQuery, "#") {
		return tg, u.fail("a URL fragment (#) means nothing here")
	}

	hostport, path, _ := strings.Cut(u.rest, "/")

	port := defaultPort
	if tg.topology == sentinel {
		port = defaultSentinelPort
	}
	for hp := range strings.SplitSeq(hostport, ",") {
		addr, err := parseHostPort(hp, port)
		if err != nil {
			return tg, u.fail("%v", err)
		}
		tg.addrs = append(tg.addrs, addr)
	}
	if tg.topology == single && len(tg.addrs) > 1 {
		return tg, u.fail("%s:// takes one host; for several use %s+cluster:// or %s+sentinel://", scheme, scheme, scheme)
	}
	return tg, u.parsePath(&tg, path)
}

// parsePath fills in tg's database, and a sentinel's master name, from
// the URL's path.
func (u storeURL) parsePath(tg *target, path string) error {
	var err error
	switch tg.topology {
	case single:
		tg.db, err = parseDB(path)
	case sentinel:
		master, db, _ := strings.Cut(path, "/")
		if master == "" {
			return u.fail("no master name: want %s://host:26379[,host:26379...]/MASTER[/DB]", u.scheme)
		}
		if tg.master, err = url.PathUnescape(master); err != nil {
			return u.fail("master name: %v", err)
		}
		tg.db, err = parseDB(db)
	case cluster:
		tg.db, err = parseDB(path)
		if err == nil && tg.db != 0 {
			err = fmt.Errorf("database %d: Redis Cluster has only database 0", tg.db)
		}
	}
	if err != nil {
		return u.fail("%v", err)
	}
	return nil
}

// credentials sets o's user name and passwords: from the URL's user info
// and the environment variables opts names.
func (u storeURL) credentials(o *redis.UniversalOptions, opts Options, tg target, lookupEnv func(string) (string, bool)) error {
	var err error
	if u.hasUserinfo {
		user, pass, hasPass := strings.Cut(u.userinfo, ":")
		if o.Username, err = url.PathUnescape(user); err != nil {
			return u.fail("user name is not valid percent-encoding")
		}
		if hasPass {
			if o.Password, err = url.PathUnescape(pass); err != nil {
				// The error would quote part of the password.
				return u.fail("password is not valid percent-encoding")
			}
		}
	}
	if opts.PasswordEnv != "" {
		if o.Password != "" {
			return u.fail("a password both in the URL and in $%s (Options.PasswordEnv): give one", opts.PasswordEnv)
		}
		pw, ok := lookupEnv(opts.PasswordEnv)
		if !ok || pw == "" {
			return u.fail("the password's environment variable $%s (Options.PasswordEnv) is not set or empty", opts.PasswordEnv)
		}
		o.Password = pw
	}
	if opts.SentinelPasswordEnv != "" {
		if tg.topology != sentinel {
			return u.fail("Options.SentinelPasswordEnv is set but the URL names no sentinel")
		}
		pw, ok := lookupEnv(opts.SentinelPasswordEnv)
		if !ok || pw == "" {
			return u.fail("the sentinel password's environment variable $%s (Options.SentinelPasswordEnv) is not set or empty", opts.SentinelPasswordEnv)
		}
		o.SentinelPassword = pw
	}
	return nil
}

// applyTLS sets o's TLS config for a rediss scheme, and refuses
// Options.TLS for a scheme without TLS.
func (u storeURL) applyTLS(o *redis.UniversalOptions, opts Options, tg target) error {
	switch {
	case tg.tls:
		cfg := &tls.Config{}
		if opts.TLS != nil {
			cfg = opts.TLS.Clone()
		}
		// ServerName stays as given: empty, crypto/tls takes it from the
		// address dialled, which is right for every node of a cluster and
		// for the master a sentinel names.
		cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS12)
		o.TLSConfig = cfg
	case opts.TLS != nil:
		return u.fail("Options.TLS is set but %s:// does not use TLS: use %s://", u.scheme, strings.Replace(u.scheme, "redis", "rediss", 1))
	}
	return nil
}

// parseHostPort checks one host[:port] (IPv6 in brackets) and fills in
// the default port.
func parseHostPort(hp, defPort string) (string, error) {
	if hp == "" {
		return "", fmt.Errorf("empty host: want host[:port]")
	}
	host, port := hp, ""
	if strings.HasPrefix(hp, "[") {
		end := strings.Index(hp, "]")
		if end < 0 {
			return "", fmt.Errorf("host %q: IPv6 address without its closing ']'", hp)
		}
		host = hp[1:end]
		if after := hp[end+1:]; after != "" {
			p, ok := strings.CutPrefix(after, ":")
			if !ok {
				return "", fmt.Errorf("host %q: want [ipv6]:port", hp)
			}
			port = p
		}
	} else if i := strings.LastIndex(hp, ":"); i >= 0 {
		host, port = hp[:i], hp[i+1:]
		if strings.Contains(host, ":") {
			return "", fmt.Errorf("host %q: an IPv6 address goes in brackets, [::1]:6379", hp)
		}
		if port == "" {
			return "", fmt.Errorf("host %q: empty port", hp)
		}
	}
	if host == "" {
		return "", fmt.Errorf("host %q: empty host name", hp)
	}
	if strings.ContainsAny(host, " \t\r\n\\") {
		return "", fmt.Errorf("host %q: not a host name", hp)
	}
	if port == "" {
		port = defPort
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("host %q: port %q is not a number from 1 to 65535", hp, port)
	}
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port, nil
	}
	return host + ":" + port, nil
}

func parseDB(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("database %q: want a number, 0 or more", s)
	}
	return n, nil
}

func applyQuery(o *redis.UniversalOptions, rawQuery string) error {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		v := q.Get(name)
		switch name {
		case "password", "sentinel_password":
			return fmt.Errorf("query parameter %s: a password goes in the user info (redis://user:PASSWORD@host) or an environment variable (Options.PasswordEnv), never in the query", name)
		case "client_name":
			o.ClientName = v
		case "pool_size":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fmt.Errorf("query parameter pool_size=%q: want a number, 1 or more", v)
			}
			o.PoolSize = n
		case "dial_timeout", "read_timeout", "write_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("query parameter %s=%q: want a positive duration such as 5s", name, v)
			}
			switch name {
			case "dial_timeout":
				o.DialTimeout = d
			case "read_timeout":
				o.ReadTimeout = d
			case "write_timeout":
				o.WriteTimeout = d
			}
		default:
			return fmt.Errorf("unknown query parameter %q: want %s", name, strings.Join(queryParams, ", "))
		}
	}
	return nil
}
