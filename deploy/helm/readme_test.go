package helm_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// A row of the chart README's values table: | `key` | type | default | description |
var valuesRow = regexp.MustCompile("(?m)^\\| `([^`]+)` \\| ([^|]+) \\| ([^|]*) \\| ([^|]*) \\|$")

type readmeRow struct{ typ, def, desc string }

func readmeValues(t *testing.T) map[string]readmeRow {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]readmeRow{}
	for _, m := range valuesRow.FindAllStringSubmatch(string(raw), -1) {
		if _, dup := rows[m[1]]; dup {
			t.Errorf("README values table: %s twice", m[1])
		}
		rows[m[1]] = readmeRow{strings.TrimSpace(m[2]), strings.TrimSpace(m[3]), strings.TrimSpace(m[4])}
	}
	if len(rows) == 0 {
		t.Fatal("README.md has no values table")
	}
	return rows
}

func chartValues(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// lookup walks a dotted key through values.
func lookup(v map[string]any, key string) (any, bool) {
	var cur any = v
	for _, k := range strings.Split(key, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// TestReadmeValues: the chart README's values table has a row for every
// top-level value and every second-level one (or rows below it), every
// row names a value that exists, with its type, and a default written as
// one code span is the value's default.
func TestReadmeValues(t *testing.T) {
	t.Parallel()
	rows := readmeValues(t)
	values := chartValues(t)

	documented := func(key string) bool {
		if _, ok := rows[key]; ok {
			return true
		}
		for k := range rows {
			if strings.HasPrefix(k, key+".") {
				return true
			}
		}
		return false
	}
	var missing []string
	for k, v := range values {
		if !documented(k) {
			missing = append(missing, k)
		}
		if m, ok := v.(map[string]any); ok {
			for k2 := range m {
				if !documented(k + "." + k2) {
					missing = append(missing, k+"."+k2)
				}
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("values.yaml keys with no row in README.md's values table: %v", missing)
	}

	span := regexp.MustCompile("^`([^`]*)`$")
	for key, row := range rows {
		v, ok := lookup(values, key)
		if !ok {
			t.Errorf("README.md documents %s, which values.yaml does not have", key)
			continue
		}
		if row.desc == "" {
			t.Errorf("README.md: %s has no description", key)
		}
		if want := typeName(v); !strings.Contains(row.typ, want) {
			t.Errorf("README.md: %s is a %q, values.yaml has a %s", key, row.typ, want)
		}
		if m := span.FindStringSubmatch(row.def); m != nil {
			want, _ := json.Marshal(v)
			if m[1] != string(want) {
				t.Errorf("README.md: %s defaults to %s, values.yaml to %s", key, m[1], want)
			}
		} else if typeName(v) != "object" && typeName(v) != "list" {
			t.Errorf("README.md: %s: write the scalar default %v as one code span, got %q", key, v, row.def)
		}
	}
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int:
		return "int"
	case bool:
		return "bool"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

// TestValuesCommented: every top-level and second-level value in
// values.yaml has a comment (above it, or on its line); config's keys are
// the worker's, documented in config.example.yaml.
func TestValuesCommented(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var bare []string
	var walk func(n *yaml.Node, path string, depth int)
	walk = func(n *yaml.Node, path string, depth int) {
		if n.Kind != yaml.MappingNode || depth > 2 {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := strings.TrimPrefix(path+"."+k.Value, ".")
			commented := k.HeadComment != "" || k.LineComment != "" || v.LineComment != ""
			if !commented {
				bare = append(bare, key)
			}
			if key != "config" {
				walk(v, key, depth+1)
			}
		}
	}
	walk(doc.Content[0], "", 1)
	if len(bare) > 0 {
		t.Errorf("values.yaml keys without a comment: %v", bare)
	}
}
