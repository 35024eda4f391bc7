package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Error is one problem in a configuration file.
type Error struct {
	// File is the file the problem is in: the configuration file as given
	// to Load, a script_file, or "" for a Config built in code.
	File string
	// Line is 1-based; 0 when the problem has no line (an unreadable file,
	// or a Config that was not read from YAML).
	Line int
	// Msg starts with the field path when there is one, e.g.
	// `agents[0].sleep.min: negative duration "-5s"`.
	Msg string
}

// Error formats e as "file:line: message", leaving out what is unknown,
// on one line: a line break in the message (a value quoted as it is by a
// library's error) is written \n or \r.
func (e Error) Error() string {
	msg := oneLine.Replace(e.Msg)
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, msg)
	case e.File != "":
		return e.File + ": " + msg
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, msg)
	default:
		return msg
	}
}

var oneLine = strings.NewReplacer("\n", `\n`, "\r", `\r`)

// Errors is every problem found in a configuration, ordered by file (the
// configuration file first) and line. Load and Validate return it as
// *Errors, never empty.
type Errors []Error

// Error prints one "file:line: message" per line.
func (e *Errors) Error() string {
	var b strings.Builder
	for i, err := range *e {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

// finish orders errs (mainFile first, then other files in the order they
// were first reported, each by line), drops exact repeats, and returns nil
// when there is nothing to report.
func finish(mainFile string, errs []Error) error {
	if len(errs) == 0 {
		return nil
	}
	rank := map[string]int{mainFile: 0}
	for _, e := range errs {
		if _, ok := rank[e.File]; !ok {
			rank[e.File] = len(rank)
		}
	}
	sort.SliceStable(errs, func(i, j int) bool {
		if ri, rj := rank[errs[i].File], rank[errs[j].File]; ri != rj {
			return ri < rj
		}
		return errs[i].Line < errs[j].Line
	})
	out := Errors(slices.Compact(errs))
	return &out
}

// Load reads the configuration file at file, parses it, expands ${VAR} and
// ${VAR:-default} from the environment, decodes it (rejecting unknown keys
// at every depth), loads the script_file of scripted models, applies the
// defaults and validates the result.
//
// Any failure is returned as *Errors listing every problem found, each as
// "file:line: message". YAML syntax errors and then problems with ${...}
// references stop loading at that stage (the rest of the file cannot be
// trusted); all other problems are collected together.
//
// Expansion happens after parsing, inside the value of each scalar, so a
// variable's content is only ever that one value: whatever YAML syntax or
// line breaks it holds, it cannot add a key, an item or an agent, and no
// line number moves. An unquoted reference takes the type its value spells
// (`port: ${PORT}` with PORT=8080 is an int); a quoted one stays a string.
// Keys and comments are not expanded; a key holding a ${...} reference is
// an error. "$$" is a literal "$"; any other "$" is left alone.
// ${VAR:-default} uses the default when VAR is unset or empty; ${VAR} with
// VAR unset is an error, with VAR set to "" it expands to "".
//
// Keys ending in _env (api_key_env, value_env, ...) name an environment
// variable that the runtime reads; Load does not read them.
func Load(file string) (*Config, error) {
	return load(file, os.LookupEnv)
}

func load(file string, lookupEnv func(string) (string, bool)) (*Config, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, &Errors{{File: file, Msg: "read config: " + pathErrorReason(err)}}
	}
	doc, errs := parseExpanded(raw, file, lookupEnv)
	if len(errs) > 0 {
		return nil, finish(file, errs)
	}

	c := &Config{File: file}
	d := newDecoder(file, map[string]bool{})
	c.lines = d.lines
	d.decode(doc, reflect.ValueOf(c).Elem(), nil)
	errs = append(errs, d.errs...)
	errs = append(errs, loadScripts(c, d)...)

	applyDefaults(c)

	v := validator{file: file, lines: d.lines, failed: d.failed}
	v.config(c)
	errs = append(errs, v.errs...)
	if err := finish(file, errs); err != nil {
		return nil, err
	}
	return c, nil
}

// pathErrorReason drops the path from an *fs.PathError: the path is
// already in front of the message.
func pathErrorReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

var yamlLineError = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// yamlParserProblems are yaml.v3's parser (as opposed to scanner) error
// messages. yaml.v3 reports their line 0-based, so one is added; the line
// is where the unfinished construct began.
var yamlParserProblems = []string{
	"did not find expected ",
	"found duplicate %",
	"found incompatible YAML document",
	"found undefined tag handle",
}

// syntaxError turns a yaml.v3 parse error ("yaml: line 3: ...") into an
// Error with that line.
func syntaxError(file string, err error) Error {
	m := yamlLineError.FindStringSubmatch(err.Error())
	if m == nil {
		return Error{File: file, Msg: "invalid YAML: " + err.Error()}
	}
	line, _ := strconv.Atoi(m[1]) // 0 when yaml.v3 gave no line
	if slices.ContainsFunc(yamlParserProblems, func(p string) bool { return strings.HasPrefix(m[2], p) }) {
		line++
	}
	return Error{File: file, Line: line, Msg: "invalid YAML: " + m[2]}
}

// --- field paths ---

// path is a field path such as agents[1].sleep.min, kept as segments so
// that problems can fall back to the nearest parent that has a line.
type path []string

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// key appends mapping keys; a key that is not a plain word (a pricing key
// like "gpt-4.1-mini") is written ["quoted"].
func (p path) key(keys ...string) path {
	q := slices.Clip(p)
	for _, k := range keys {
		if plainKey.MatchString(k) {
			q = append(q, k)
		} else {
			q = append(q, "["+strconv.Quote(k)+"]")
		}
	}
	return q
}

func (p path) index(i int) path {
	return append(slices.Clip(p), "["+strconv.Itoa(i)+"]")
}

func (p path) String() string {
	var b strings.Builder
	for i, s := range p {
		if i > 0 && !strings.HasPrefix(s, "[") {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

// --- decoding ---

// decoder decodes a yaml.Node into the schema types by walking their yaml
// tags itself: yaml.v3's Node.Decode cannot reject unknown keys, and
// walking gives every problem its field path. Leaves (strings, numbers,
// Duration, free-form maps) are handed to Node.Decode.
type decoder struct {
	file string
	// lines maps a field path to the line of its key (or list item).
	lines map[string]int
	// failed holds paths whose value could not be decoded: validation
	// stays quiet about them rather than complain about the zero value.
	failed map[string]bool
	errs   []Error
}

func newDecoder(file string, failed map[string]bool) *decoder {
	return &decoder{file: file, lines: map[string]int{}, failed: failed}
}

// report records a problem that leaves the value at p usable.
func (d *decoder) report(n *yaml.Node, p path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if len(p) > 0 {
		msg = p.String() + ": " + msg
	}
	d.errs = append(d.errs, Error{File: d.file, Line: n.Line, Msg: msg})
}

// fail records a value at p that could not be decoded.
func (d *decoder) fail(n *yaml.Node, p path, format string, args ...any) {
	d.report(n, p, format, args...)
	d.failed[p.String()] = true
}

var (
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	scriptStepType  = reflect.TypeFor[ScriptStep]()
)

func (d *decoder) decode(n *yaml.Node, v reflect.Value, p path) {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return
		}
		n = n.Content[0]
	}
	if len(p) == 0 {
		d.lines[""] = n.Line
	}
	n = resolveAlias(n)
	if n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null") {
		return // v is still its zero value: nothing was decoded into it yet
	}
	if reflect.PointerTo(v.Type()).Implements(unmarshalerType) {
		d.leaf(n, v, p)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), p)
	case reflect.Struct:
		d.structure(n, v, p)
	case reflect.Slice:
		d.sequence(n, v, p)
	case reflect.Map:
		if v.Type().Key().Kind() == reflect.String && v.Type().Elem().Kind() == reflect.Struct {
			d.mapping(n, v, p)
			return
		}
		d.leaf(n, v, p)
	default:
		d.leaf(n, v, p)
	}
}

func (d *decoder) leaf(n *yaml.Node, v reflect.Value, p path) {
	if err := n.Decode(v.Addr().Interface()); err != nil {
		d.fail(n, p, "%s", leafMessage(err))
	}
}

var yamlLinePrefix = regexp.MustCompile(`^line \d+: `)

// leafMessage strips yaml.v3's "line N:" prefixes: the line is in the Error.
func leafMessage(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			msgs[i] = yamlLinePrefix.ReplaceAllString(m, "")
		}
		return strings.Join(msgs, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

func (d *decoder) structure(n *yaml.Node, v reflect.Value, p path) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, p, "want a mapping, got %s", describeNode(n))
		return
	}
	names, fields := yamlFields(v.Type())
	for _, kv := range d.pairs(n, p) {
		i, ok := fields[kv.key.Value]
		if !ok {
			d.report(kv.key, p, "unknown key %q%s", kv.key.Value, suggest(kv.key.Value, names))
			continue
		}
		fp := p.key(kv.key.Value)
		d.lines[fp.String()] = kv.key.Line
		d.decode(kv.val, v.Field(i), fp)
	}
}

func (d *decoder) sequence(n *yaml.Node, v reflect.Value, p path) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, p, "want a list, got %s", describeNode(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		ip := p.index(i)
		d.lines[ip.String()] = item.Line
		d.decode(item, s.Index(i), ip)
		if v.Type().Elem() == scriptStepType {
			s.Index(i).Addr().Interface().(*ScriptStep).Line = item.Line
		}
	}
	v.Set(s)
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, p path) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, p, "want a mapping, got %s", describeNode(n))
		return
	}
	m := reflect.MakeMap(v.Type())
	for _, kv := range d.pairs(n, p) {
		kp := p.key(kv.key.Value)
		d.lines[kp.String()] = kv.key.Line
		ev := reflect.New(v.Type().Elem()).Elem()
		d.decode(kv.val, ev, kp)
		m.SetMapIndex(reflect.ValueOf(kv.key.Value).Convert(v.Type().Key()), ev)
	}
	v.Set(m)
}

type pair struct{ key, val *yaml.Node }

// pairs returns the entries of mapping n, reporting duplicate and
// non-string keys, with merge keys (<<: *anchor) resolved: an explicit key
// wins over a merged one, and among merged mappings the first wins.
func (d *decoder) pairs(n *yaml.Node, p path) []pair {
	var explicit, merged []pair
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge":
			merged = append(merged, d.mergePairs(val, p)...)
		case k.Kind != yaml.ScalarNode:
			d.report(k, p, "keys must be strings, got %s", describeNode(k))
		case seen[k.Value] != nil:
			d.report(k, p, "duplicate key %q (first at line %d)", k.Value, seen[k.Value].Line)
		default:
			seen[k.Value] = k
			explicit = append(explicit, pair{k, val})
		}
	}
	for _, kv := range merged {
		if seen[kv.key.Value] == nil {
			seen[kv.key.Value] = kv.key
			explicit = append(explicit, kv)
		}
	}
	return explicit
}

func (d *decoder) mergePairs(val *yaml.Node, p path) []pair {
	val = resolveAlias(val)
	switch val.Kind {
	case yaml.MappingNode:
		return d.pairs(val, p)
	case yaml.SequenceNode:
		var out []pair
		for _, item := range val.Content {
			if item = resolveAlias(item); item.Kind != yaml.MappingNode {
				d.report(item, p, "<< wants a mapping or a list of mappings, got %s", describeNode(item))
				continue
			}
			out = append(out, d.pairs(item, p)...)
		}
		return out
	default:
		d.report(val, p, "<< wants a mapping or a list of mappings, got %s", describeNode(val))
		return nil
	}
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// yamlFields returns the yaml key names of struct type t in declaration
// order and a map from key to field index. Fields tagged "-" are not keys.
func yamlFields(t reflect.Type) ([]string, map[string]int) {
	var names []string
	index := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		names = append(names, name)
		index[name] = i
	}
	return names, index
}

// suggest names the closest known key to a misspelt one, or lists them all.
func suggest(key string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if d := editDistance(key, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf(`; did you mean %q?`, best)
	}
	return " (known keys: " + strings.Join(known, ", ") + ")"
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func describeNode(n *yaml.Node) string {
	switch resolveAlias(n).Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	default:
		return "nothing"
	}
}

// --- script files ---

// loadScripts reads the script_file of every scripted model into its
// Script, relative to the configuration file's directory. Script files are
// not ${ENV}-expanded: they are canned model output, where "$" is text.
func loadScripts(c *Config, d *decoder) []Error {
	var errs []Error
	for _, name := range sortedKeys(c.Models) {
		m := c.Models[name]
		if m.Provider != "scripted" || m.ScriptFile == "" {
			continue
		}
		p := path{"models"}.key(name, "script_file")
		at := func(format string, args ...any) {
			line := d.lines[p.String()]
			errs = append(errs, Error{File: d.file, Line: line, Msg: p.String() + ": " + fmt.Sprintf(format, args...)})
		}
		if len(m.Script) > 0 {
			at("script and script_file are mutually exclusive")
			continue
		}
		file := scriptPath(c.File, m.ScriptFile)
		raw, err := os.ReadFile(file)
		if err != nil {
			at("read %s: %s", file, pathErrorReason(err))
			continue
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			errs = append(errs, syntaxError(file, err))
			continue
		}
		sd := newDecoder(file, d.failed)
		var steps []ScriptStep
		sd.decode(&doc, reflect.ValueOf(&steps).Elem(), path{"models"}.key(name, "script"))
		errs = append(errs, sd.errs...)
		if len(steps) == 0 && len(sd.errs) == 0 {
			at("%s holds no steps", file)
		}
		m.Script = steps
		c.Models[name] = m
	}
	return errs
}

// scriptPath resolves a script_file against the configuration file's
// directory.
func scriptPath(configFile, scriptFile string) string {
	if filepath.IsAbs(scriptFile) || configFile == "" {
		return scriptFile
	}
	return filepath.Join(filepath.Dir(configFile), scriptFile)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
