package redisstore

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// env is a fake environment for Options.PasswordEnv.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	noEnv := env(nil)
	for _, tc := range []struct {
		url  string
		opts Options
		env  map[string]string
		// what the options must say
		topology       string
		addrs          string
		db             int
		master         string
		user, password string
		sentinelPass   string
		tls            bool
		check          func(t *testing.T, o *redis.UniversalOptions)
	}{
		{url: "redis://localhost", topology: single, addrs: "localhost:6379"},
		{url: "REDIS://Localhost:6380/2", topology: single, addrs: "Localhost:6380", db: 2},
		{url: "redis://127.0.0.1:6379/0", topology: single, addrs: "127.0.0.1:6379"},
		{url: "redis://[::1]:7000/1", topology: single, addrs: "[::1]:7000", db: 1},
		{url: "redis://[::1]", topology: single, addrs: "[::1]:6379"},
		{url: "redis://:pw@h", topology: single, addrs: "h:6379", password: "pw"},
		{url: "redis://alice@h", topology: single, addrs: "h:6379", user: "alice"},
		{url: "redis://alice:p%40ss%3Aw%2Frd@h:1/3", topology: single, addrs: "h:1", db: 3, user: "alice", password: "p@ss:w/rd"},
		// Unescaped: the user info still ends at the last '@'.
		{url: "redis://alice:p@ss/w@h:1", topology: single, addrs: "h:1", user: "alice", password: "p@ss/w"},
		{url: "redis://alice@h", opts: Options{PasswordEnv: "PW"}, env: map[string]string{"PW": "from-env"},
			topology: single, addrs: "h:6379", user: "alice", password: "from-env"},
		{url: "rediss://cache.example.com:6380/1", topology: single, addrs: "cache.example.com:6380", db: 1, tls: true},
		{url: "rediss://h", opts: Options{TLS: &tls.Config{ServerName: "other", MinVersion: tls.VersionTLS13}},
			topology: single, addrs: "h:6379", tls: true,
			check: func(t *testing.T, o *redis.UniversalOptions) {
				if o.TLSConfig.ServerName != "other" || o.TLSConfig.MinVersion != tls.VersionTLS13 {
					t.Errorf("TLS config not the caller's: %+v", o.TLSConfig)
				}
			}},
		{url: "redis://h?dial_timeout=2s&read_timeout=500ms&write_timeout=1s&pool_size=20&client_name=worker-a",
			topology: single, addrs: "h:6379",
			check: func(t *testing.T, o *redis.UniversalOptions) {
				if o.DialTimeout != 2*time.Second || o.ReadTimeout != 500*time.Millisecond || o.WriteTimeout != time.Second ||
					o.PoolSize != 20 || o.ClientName != "worker-a" {
					t.Errorf("query not applied: %+v", o)
				}
			}},
		{url: "redis+sentinel://s1,s2:26380/mymaster/3", topology: sentinel, addrs: "s1:26379,s2:26380", master: "mymaster", db: 3},
		{url: "redis+sentinel://:pw@s1/my%20master", opts: Options{SentinelPasswordEnv: "SPW"}, env: map[string]string{"SPW": "spw"},
			topology: sentinel, addrs: "s1:26379", master: "my master", password: "pw", sentinelPass: "spw"},
		{url: "rediss+sentinel://s1/mymaster", topology: sentinel, addrs: "s1:26379", master: "mymaster", tls: true},
		{url: "redis+cluster://n1:7000,n2:7001,[::1]:7002", topology: cluster, addrs: "n1:7000,n2:7001,[::1]:7002"},
		{url: "redis+cluster://n1/0", topology: cluster, addrs: "n1:6379"},
		{url: "rediss+cluster://u:pw@n1", topology: cluster, addrs: "n1:6379", user: "u", password: "pw", tls: true},
	} {
		t.Run(tc.url, func(t *testing.T) {
			lookup := noEnv
			if tc.env != nil {
				lookup = env(tc.env)
			}
			o, tg, err := parseURL(tc.url, tc.opts, lookup)
			if err != nil {
				t.Fatal(err)
			}
			if tg.topology != tc.topology || strings.Join(o.Addrs, ",") != tc.addrs || o.DB != tc.db || o.MasterName != tc.master {
				t.Errorf("got %s %v db %d master %q; want %s %s db %d master %q",
					tg.topology, o.Addrs, o.DB, o.MasterName, tc.topology, tc.addrs, tc.db, tc.master)
			}
			if o.Username != tc.user || o.Password != tc.password || o.SentinelPassword != tc.sentinelPass {
				t.Errorf("credentials %q/%q sentinel %q; want %q/%q sentinel %q",
					o.Username, o.Password, o.SentinelPassword, tc.user, tc.password, tc.sentinelPass)
			}
			if (o.TLSConfig != nil) != tc.tls {
				t.Errorf("TLS = %v, want %v", o.TLSConfig != nil, tc.tls)
			}
			if o.TLSConfig != nil && o.TLSConfig.MinVersion < tls.VersionTLS12 {
				t.Errorf("TLS MinVersion %x, want at least 1.2", o.TLSConfig.MinVersion)
			}
			if !o.ContextTimeoutEnabled {
				t.Error("ContextTimeoutEnabled is off: a cancelled context would wait for the socket timeout")
			}
			if tc.check != nil {
				tc.check(t, o)
			}
			// The options choose the client go-redis builds (no
			// connection is made here).
			c := redis.NewUniversalClient(o)
			defer func() { _ = c.Close() }()
			_, isCluster := c.(*redis.ClusterClient)
			if isCluster != (tc.topology == cluster) {
				t.Errorf("go-redis built a %T for a %s URL", c, tc.topology)
			}
			if strings.Contains(tg.String(), tc.password+"@") && tc.password != "" {
				t.Errorf("target %q shows the password", tg)
			}
		})
	}
}

func TestParseURLErrors(t *testing.T) {
	t.Parallel()
	const secret = "hunter2"
	for _, tc := range []struct {
		url  string
		opts Options
		want string
	}{
		{url: "", want: `without "://"`},
		{url: "localhost:6379", want: `without "://"`},
		{url: secret + "@localhost", want: `without "://"`},
		{url: "http://h", want: `unknown scheme "http"`},
		{url: "unix:///run/redis.sock", want: `unknown scheme "unix"`},
		{url: "redis://h1,h2", want: "takes one host; for several use redis+cluster:// or redis+sentinel://"},
		{url: "redis://h,", want: "empty host"},
		{url: "redis://", want: "empty host"},
		{url: "redis://:6379", want: "empty host name"},
		{url: "redis://h:", want: "empty port"},
		{url: "redis://h:abc", want: `port "abc" is not a number`},
		{url: "redis://h:0", want: `port "0" is not a number from 1 to 65535`},
		{url: "redis://h:70000", want: `port "70000"`},
		{url: "redis://::1", want: "an IPv6 address goes in brackets"},
		{url: "redis://[::1", want: "without its closing ']'"},
		{url: "redis://[::1]x", want: "want [ipv6]:port"},
		{url: "redis://h/x", want: `database "x"`},
		{url: "redis://h/1/2", want: `database "1/2"`},
		{url: "redis://h/-1", want: `database "-1"`},
		{url: "redis://h#frag", want: "fragment"},
		{url: "redis+sentinel://s1:26379", want: "no master name"},
		{url: "redis+sentinel://s1:26379/", want: "no master name"},
		{url: "redis+sentinel://s1/m/x", want: `database "x"`},
		{url: "redis+cluster://n1/2", want: "Redis Cluster has only database 0"},
		{url: "redis://h?foo=1", want: `unknown query parameter "foo": want client_name, dial_timeout`},
		{url: "redis://h?password=" + secret, want: "never in the query"},
		{url: "redis://h?pool_size=0", want: "pool_size"},
		{url: "redis://h?dial_timeout=5", want: "want a positive duration"},
		{url: "redis://h?a=%zz", want: "query"},
		{url: "redis://u:" + secret + "@h:badport", want: `store URL "redis://***@h:badport": host "h:badport"`},
		{url: "redis://u:" + secret + "@h1,h2", want: "takes one host"},
		{url: "redis://u:hun%zzter2@h", want: "password is not valid percent-encoding"},
		{url: "redis://u%zz:" + secret + "@h", want: "user name is not valid percent-encoding"},
		{url: "ftp://u:" + secret + "@h", want: `store URL "ftp://***@h": unknown scheme`},
		{url: "redis://:" + secret + "@h", opts: Options{PasswordEnv: "PW"}, want: "a password both in the URL and in $PW"},
		{url: "redis://h", opts: Options{PasswordEnv: "UNSET"}, want: "$UNSET (Options.PasswordEnv) is not set or empty"},
		{url: "redis://h", opts: Options{PasswordEnv: "EMPTY"}, want: "$EMPTY (Options.PasswordEnv) is not set or empty"},
		{url: "redis://h", opts: Options{SentinelPasswordEnv: "PW"}, want: "SentinelPasswordEnv is set but the URL names no sentinel"},
		{url: "redis+sentinel://s/m", opts: Options{SentinelPasswordEnv: "UNSET"}, want: "$UNSET (Options.SentinelPasswordEnv) is not set"},
		{url: "redis://h", opts: Options{TLS: &tls.Config{}}, want: "does not use TLS: use rediss://"},
		{url: "redis+cluster://h", opts: Options{TLS: &tls.Config{}}, want: "use rediss+cluster://"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, _, err := parseURL(tc.url, tc.opts, env(map[string]string{"PW": secret, "EMPTY": ""}))
			if err == nil {
				t.Fatalf("no error, want one containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\nwant it to contain %q", err, tc.want)
			}
			for _, leak := range []string{secret, "hun", "ter2"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("error %q shows the password", err)
				}
			}
		})
	}
}
