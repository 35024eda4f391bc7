package api

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/access"
)

// docRoute is a row of the route table in doc.go: "//<tab>METHOD /path
// role  answer", the columns apart by two spaces or more.
var docRoute = regexp.MustCompile(`^//\t(GET|HEAD|POST|PUT|PATCH|DELETE)\s+(\S+)\s+(.+?)\s{2,}`)

// TestDocRouteTable: the package documentation's table lists exactly the
// routes the server registers, each with the role its route needs, so
// the table cannot drift from the routes authorise enforces.
func TestDocRouteTable(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{}
	for _, line := range strings.Split(string(src), "\n") {
		m := docRoute.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		path, _, _ := strings.Cut(m[2], "?")
		if path == "/" {
			path = "/{$}"
		}
		documented[m[1]+" "+path] = m[3]
	}

	s := &Server{mux: http.NewServeMux(), table: map[string]route{}}
	s.register(s.routes())
	for pattern, rt := range s.table {
		role, ok := documented[pattern]
		if !ok {
			t.Errorf("%s is served but not in doc.go's route table", pattern)
			continue
		}
		var want access.Need
		switch {
		case strings.HasPrefix(role, "none"):
			if !isSessionRoute(pattern) {
				t.Errorf("doc.go says %s needs no token, but it is authenticated", pattern)
			}
			continue
		case strings.Contains(role, "ingest"):
			want = access.Ingest
		case strings.HasPrefix(role, "operate"):
			want = access.Operate
		default:
			want = access.Read
		}
		if rt.need != want {
			t.Errorf("doc.go says %s needs %q, the route needs %s", pattern, role, rt.need.Roles())
		}
	}
	for pattern := range documented {
		if _, ok := s.table[pattern]; !ok {
			t.Errorf("doc.go lists %s, which is not served", pattern)
		}
	}
}
