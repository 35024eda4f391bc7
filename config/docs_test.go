package config

// Tests that keep the documentation true: docs/configuration.md names every
// key of the schema (and no key the schema lacks), and the links of
// README.md and docs/*.md resolve to files inside the repository.

import (
	"bufio"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// configurationDoc is the configuration reference, relative to the
// repository root.
const configurationDoc = "docs/configuration.md"

// repoRoot returns the repository's root: the parent of this package's
// directory, where go.mod is.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s has no go.mod: %v", root, err)
	}
	return root
}

var durationType = reflect.TypeFor[Duration]()

// keyPaths walks the yaml tags of t and returns every key path: leaves
// (keys that hold a value) and, separately, inner keys (keys that hold a
// mapping or a list of mappings). A list of mappings is written key[], a
// map from names to mappings key.<name>: agents[].turn.retry.base,
// models.<name>.retry.max, nats.token_file.
func keyPaths(t reflect.Type) (leaves, inner []string) {
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case t == durationType:
			leaves = append(leaves, prefix)
		case t.Kind() == reflect.Struct:
			if prefix != "" {
				inner = append(inner, prefix)
			}
			names, fields := yamlFields(t)
			for _, name := range names {
				p := name
				if prefix != "" {
					p = prefix + "." + name
				}
				walk(t.Field(fields[name]).Type, p)
			}
		case t.Kind() == reflect.Slice && isMapping(t.Elem()):
			inner = append(inner, prefix)
			walk(t.Elem(), prefix+"[]")
		case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && isMapping(t.Elem()):
			inner = append(inner, prefix)
			walk(t.Elem(), prefix+".<name>")
		default:
			leaves = append(leaves, prefix)
		}
	}
	walk(t, "")
	return leaves, inner
}

// isMapping reports whether values of t are written as a YAML mapping
// with keys of their own (a struct other than Duration).
func isMapping(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct && t != durationType
}

func readDoc(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return string(data)
}

func TestKeyPathsWalk(t *testing.T) {
	t.Parallel()
	leaves, inner := keyPaths(reflect.TypeFor[Config]())
	for _, want := range []string{"data_dir", "nats.token_file", "nats.tls.ca_file", "agents[].turn.retry.base",
		"agents[].schedules[].cron", "models.<name>.retry.max", "models.<name>.script[].call.name",
		"models.<name>.headers", "pricing.<name>.output_per_mtok", "api.tokens[].agents"} {
		if !slices.Contains(leaves, want) {
			t.Errorf("key path %q not among the leaves %v", want, leaves)
		}
	}
	for _, want := range []string{"agents", "agents[].turn", "agents[].turn.retry", "models", "models.<name>.script"} {
		if !slices.Contains(inner, want) {
			t.Errorf("key path %q not among the inner keys %v", want, inner)
		}
	}
	for _, p := range append(leaves, inner...) {
		if p == "" || p == "file" || strings.HasSuffix(p, ".line") {
			t.Errorf("key path %q: a field that is not a YAML key was walked", p)
		}
	}
}

// TestConfigurationDocCoversEveryKey fails naming every key of the schema
// that docs/configuration.md does not mention as `key.path`.
func TestConfigurationDocCoversEveryKey(t *testing.T) {
	t.Parallel()
	doc := readDoc(t, configurationDoc)
	leaves, _ := keyPaths(reflect.TypeFor[Config]())
	var missing []string
	for _, p := range leaves {
		if !strings.Contains(doc, "`"+p+"`") {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s does not document %d key(s) of config.Config; add a table row for each, written `path` in backticks:\n  %s",
			configurationDoc, len(missing), strings.Join(missing, "\n  "))
	}
}

// TestConfigurationDocNamesOnlyRealKeys fails naming every key in the
// first column of a "key" table of docs/configuration.md that the schema
// does not have (a renamed or removed key left behind).
func TestConfigurationDocNamesOnlyRealKeys(t *testing.T) {
	t.Parallel()
	doc := readDoc(t, configurationDoc)
	leaves, inner := keyPaths(reflect.TypeFor[Config]())
	known := map[string]bool{}
	for _, p := range append(leaves, inner...) {
		known[p] = true
	}
	codeSpan := regexp.MustCompile("`([^`]+)`")
	var unknown []string
	inKeyTable, rows := false, 0
	sc := bufio.NewScanner(strings.NewReader(doc))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") {
			inKeyTable = false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		first := strings.TrimSpace(cells[0])
		switch {
		case strings.EqualFold(first, "key"):
			inKeyTable = true
			continue
		case !inKeyTable || strings.Trim(first, "-: ") == "":
			continue
		}
		rows++
		m := codeSpan.FindStringSubmatch(first)
		if m == nil || !known[m[1]] {
			unknown = append(unknown, formatLine(n, first))
		}
	}
	if rows == 0 {
		t.Fatalf("%s has no table whose first column is headed \"key\"", configurationDoc)
	}
	if len(unknown) > 0 {
		t.Errorf("%s: the first cell of these key-table rows is not a key path of config.Config (written `path`, as in agents[].turn.retry.base or models.<name>.model):\n  %s",
			configurationDoc, strings.Join(unknown, "\n  "))
	}
}

func formatLine(n int, s string) string { return "line " + strconv.Itoa(n) + ": " + s }

// --- links ---

var (
	// inlineLink is [text](target) or ![alt](target "title").
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refDefinition is a reference-style link definition: [label]: target.
	refDefinition = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	// htmlLink is an href or src attribute.
	htmlLink = regexp.MustCompile(`(?i)\b(?:href|src)\s*=\s*"([^"]*)"`)
	// inlineCode is inline code, whose text is not a link.
	inlineCode = regexp.MustCompile("``[^`]*``|`[^`\n]*`")
	// scheme starts an absolute URL (https:, mailto:, ...).
	scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	// htmlAnchor is an explicit anchor: <a id="..."> or <a name="...">.
	htmlAnchor = regexp.MustCompile(`(?i)<a\s+(?:id|name)\s*=\s*"([^"]+)"`)
	// markdownLinkText is [text](target) inside a heading: only the text
	// counts for its anchor.
	markdownLinkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// markdownLine is one line of a Markdown file outside fenced code blocks,
// with its inline code spans blanked out.
type markdownLine struct {
	n    int
	text string
	raw  string // with code spans, for headings
}

// proseLines returns the lines of a Markdown document that are not in a
// fenced code block.
func proseLines(doc string) []markdownLine {
	var out []markdownLine
	fence := ""
	for i, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		out = append(out, markdownLine{n: i + 1, text: inlineCode.ReplaceAllString(line, "code"), raw: line})
	}
	return out
}

// anchors returns the anchors a Markdown document defines: GitHub's
// heading slugs (with -1, -2 for repeats) and explicit <a id>/<a name>.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range proseLines(doc) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(l.raw, -1) {
			out[m[1]] = true
		}
		trimmed := strings.TrimLeft(l.raw, " ")
		if !strings.HasPrefix(trimmed, "#") {
			continue
		}
		heading := strings.TrimLeft(trimmed, "#")
		if heading != "" && heading[0] != ' ' && heading[0] != '\t' {
			continue // "#tag", not a heading
		}
		slug := slugify(heading)
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// slugify makes a heading's anchor as GitHub does: the rendered text in
// lower case, spaces as hyphens, and only letters, digits, hyphens and
// underscores kept.
func slugify(heading string) string {
	text := markdownLinkText.ReplaceAllString(strings.TrimSpace(strings.TrimRight(strings.TrimSpace(heading), "#")), "$1")
	text = strings.ReplaceAll(text, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// linkTargets returns the link targets of a Markdown document, each with
// its line.
func linkTargets(doc string) []markdownLine {
	var out []markdownLine
	for _, l := range proseLines(doc) {
		for _, re := range []*regexp.Regexp{inlineLink, refDefinition, htmlLink} {
			for _, m := range re.FindAllStringSubmatch(l.text, -1) {
				out = append(out, markdownLine{n: l.n, text: m[1]})
			}
		}
	}
	return out
}

// TestDocLinksStayInRepo checks every link of README.md and docs/*.md: it
// must be relative, resolve to a file or directory inside the repository
// (never above its root), and an anchor into a Markdown file must name one
// of its headings.
func TestDocLinksStayInRepo(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{filepath.Join(root, "README.md")}, docs...)
	for _, want := range []string{"architecture.md", "operations.md", "configuration.md"} {
		if !slices.Contains(files, filepath.Join(root, "docs", want)) {
			t.Errorf("docs/%s is missing", want)
		}
	}
	anchorCache := map[string]map[string]bool{}
	anchorsOf := func(file string) map[string]bool {
		if a, ok := anchorCache[file]; ok {
			return a
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		anchorCache[file] = anchors(string(data))
		return anchorCache[file]
	}
	checked := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		for _, link := range linkTargets(string(data)) {
			checked++
			where := rel + ":" + strconv.Itoa(link.n) + ": link " + link.text
			target := link.text
			if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
				t.Errorf("%s points outside the repository; link a file in the repository instead", where)
				continue
			}
			pathPart, fragment, _ := strings.Cut(target, "#")
			if p, err := url.PathUnescape(pathPart); err == nil {
				pathPart = p
			}
			resolved := file
			if pathPart != "" {
				base := filepath.Dir(file)
				if strings.HasPrefix(pathPart, "/") {
					base = root
				}
				resolved = filepath.Join(base, filepath.FromSlash(pathPart))
				if r, err := filepath.Rel(root, resolved); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
					t.Errorf("%s escapes the repository (resolves to %s)", where, resolved)
					continue
				}
				info, err := os.Stat(resolved)
				if err != nil {
					t.Errorf("%s: target does not exist in the repository", where)
					continue
				}
				if real, err := filepath.EvalSymlinks(resolved); err == nil {
					if r, err := filepath.Rel(root, real); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
						t.Errorf("%s escapes the repository through a symbolic link (to %s)", where, real)
						continue
					}
				}
				if info.IsDir() {
					continue
				}
			}
			if fragment != "" && strings.EqualFold(filepath.Ext(resolved), ".md") && !anchorsOf(resolved)[fragment] {
				t.Errorf("%s: %s has no heading with anchor #%s", where, filepath.Base(resolved), fragment)
			}
		}
	}
	if checked == 0 {
		t.Error("no links found in README.md and docs/*.md: the link scanner is broken")
	}
}

func TestLinkScanner(t *testing.T) {
	t.Parallel()
	doc := "# Title\n\nSee [a](docs/a.md#x) and ![b](img.png \"t\") and `[not](code.md)`.\n" +
		"```\n[no](fenced.md)\n```\n[ref]: ../up.md\n<a href=\"h.md\">h</a>\n## Failure behaviour\n## Failure behaviour\n" +
		"### `api.listen` and [link](x.md) — done\n"
	var got []string
	for _, l := range linkTargets(doc) {
		got = append(got, l.text)
	}
	want := []string{"docs/a.md#x", "img.png", "../up.md", "h.md", "x.md"}
	if !slices.Equal(got, want) {
		t.Errorf("linkTargets = %q, want %q", got, want)
	}
	a := anchors(doc)
	for _, want := range []string{"title", "failure-behaviour", "failure-behaviour-1", "apilisten-and-link--done"} {
		if !a[want] {
			t.Errorf("anchor %q not found in %v", want, a)
		}
	}
}
