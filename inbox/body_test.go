package inbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var rejectReasons = []string{RejectTooLarge, RejectInvalidUTF8, RejectInvalidJSON, RejectNoText, RejectEmpty}

func TestParseBodyRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		body     string
		maxBytes int
		reason   string
		detail   []string // substrings the detail must hold
	}{
		{"over the limit", "0123456789", 9, RejectTooLarge, []string{"10 bytes", "limit is 9"}},
		{"limit checked before UTF-8", "\xff\xff\xff", 2, RejectTooLarge, []string{"3 bytes", "limit is 2"}},
		{"bad byte", "héllo\xffworld", 0, RejectInvalidUTF8, []string{"byte offset 6"}},
		{"truncated rune", "ok \xe2\x82", 0, RejectInvalidUTF8, []string{"byte offset 3"}},
		{"bad byte inside JSON", `{"text": "a` + "\xc0" + `"}`, 0, RejectInvalidUTF8, []string{"byte offset 11"}},
		{"nothing", "", 0, RejectEmpty, nil},
		{"whitespace", " \t\r\n\u00a0\u2003 ", 0, RejectEmpty, nil},
		{"byte-order mark only", "\ufeff \n", 0, RejectEmpty, nil},
		{"unclosed object", `{"text": "hi"`, 0, RejectInvalidJSON, []string{"unexpected end of JSON input"}},
		{"trailing comma", `  {"text": "hi",}`, 0, RejectInvalidJSON, []string{"invalid character '}'", "byte offset 17"}},
		{"trailing data", `{"text": "hi"} {"text": "again"}`, 0, RejectInvalidJSON, []string{"after top-level value"}},
		{"bare word", `{text: "hi"}`, 0, RejectInvalidJSON, []string{"invalid character 't'"}},
		{"id is a boolean", `{"text": "hi", "id": true}`, 0, RejectInvalidJSON, []string{`"id" is a boolean`}},
		{"from is an object", `{"text": "hi", "from": {"name": "x"}}`, 0, RejectInvalidJSON, []string{`"from" is an object`}},
		{"attributes not an object", `{"text": "hi", "attributes": ["a"]}`, 0, RejectInvalidJSON, []string{`"attributes" is an array`}},
		{"alertmanager label not a string", `{"status": "firing", "alerts": [{"labels": {"alertname": 5}}]}`, 0, RejectInvalidJSON, []string{"alertmanager payload", `"alerts.labels`, "want a string"}},
		{"alertmanager alert not an object", `{"status": "firing", "alerts": ["HighCPU"]}`, 0, RejectInvalidJSON, []string{"alertmanager payload", "want an object"}},
		{"empty object", `{}`, 0, RejectNoText, []string{`no "text"`}},
		{"wrong-case field", `{"Text": "hi"}`, 0, RejectNoText, []string{`no "text"`}},
		{"blank text", `{"text": " \n\t "}`, 0, RejectNoText, []string{"blank"}},
		{"text is a number", `{"text": 42}`, 0, RejectNoText, []string{"a number, not a string"}},
		{"text is null", `{"text": null, "id": "m-1"}`, 0, RejectNoText, []string{"null, not a string"}},
		{"alertmanager without alerts", `{"version": "4", "status": "resolved", "receiver": "oncall", "alerts": []}`, 0, RejectNoText, []string{"no alerts"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := ParseBody([]byte(tt.body), tt.maxBytes)
			var rej *RejectError
			if !errors.As(err, &rej) {
				t.Fatalf("ParseBody(%q) = %+v, %v; want a *RejectError", tt.body, b, err)
			}
			if rej.Reason != tt.reason {
				t.Fatalf("reason = %q (%s), want %q", rej.Reason, rej.Detail, tt.reason)
			}
			for _, want := range tt.detail {
				if !strings.Contains(rej.Detail, want) {
					t.Errorf("detail %q does not mention %q", rej.Detail, want)
				}
			}
			if got, want := err.Error(), rej.Reason+": "+rej.Detail; got != want {
				t.Errorf("Error() = %q, want %q", got, want)
			}
			if b.Text != "" || b.Format != "" {
				t.Errorf("rejected body came with content: %+v", b)
			}
		})
	}
}

func TestParseBodyInvalidJSONDetailIsBounded(t *testing.T) {
	t.Parallel()
	// A long label name lands in the decoder's message.
	long := strings.Repeat("é", 300)
	_, err := ParseBody([]byte(`{"status": "firing", "alerts": [{"labels": {"`+long+`": 1}}]}`), 0)
	var rej *RejectError
	if !errors.As(err, &rej) || rej.Reason != RejectInvalidJSON {
		t.Fatalf("err = %v, want invalid_json", err)
	}
	if len(rej.Detail) > maxJSONDetail || !utf8.ValidString(rej.Detail) {
		t.Fatalf("detail is %d bytes (valid UTF-8: %v), want at most %d and valid", len(rej.Detail), utf8.ValidString(rej.Detail), maxJSONDetail)
	}
}

func TestParseBodySizeLimit(t *testing.T) {
	t.Parallel()
	body := []byte("twelve bytes")
	for _, limit := range []int{0, -1, len(body)} {
		if _, err := ParseBody(body, limit); err != nil {
			t.Errorf("limit %d: %v, want accepted", limit, err)
		}
	}
}

func TestParseBodyPlainText(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, body, text string }{
		{"simple", "disk full on db-1", "disk full on db-1"},
		{"trimmed, inner lines kept", "\n  line one\n\n  line two \t\n", "line one\n\n  line two"},
		{"byte-order mark", "\ufeffhello", "hello"},
		{"JSON array is text", `[{"text": "not parsed"}]`, `[{"text": "not parsed"}]`},
		{"JSON string is text", `"quoted"`, `"quoted"`},
		{"JSON number is text", ` 42 `, `42`},
		{"brace later in text", `note: {"text": "x"}`, `note: {"text": "x"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := ParseBody([]byte(tt.body), 1024)
			if err != nil {
				t.Fatal(err)
			}
			want := Body{Text: tt.text, Format: FormatText}
			if !bodiesEqual(b, want) {
				t.Fatalf("ParseBody(%q) = %+v, want %+v", tt.body, b, want)
			}
		})
	}
}

func TestParseBodyEnvelope(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want Body
	}{
		{
			name: "text only",
			body: `{"text": "hello"}`,
			want: Body{Text: "hello", Format: FormatEnvelope},
		},
		{
			name: "every field, non-strings stringified as JSON text",
			body: `{
				"text": "  queue backlog is 12000\n",
				"id": " evt-42 ",
				"from": "backlog-watcher",
				"attributes": {
					"queue": "payments",
					"depth": 12000,
					"ratio": 1.50,
					"big": 1e3,
					"paging": true,
					"owner": null,
					"tags": ["a", "b"],
					"where": {"dc": "fra", "rack": 7},
					"empty": ""
				},
				"priority": "ignored"
			}`,
			want: Body{
				Text:   "queue backlog is 12000",
				ID:     "evt-42",
				From:   "backlog-watcher",
				Format: FormatEnvelope,
				Attributes: map[string]string{
					"queue":  "payments",
					"depth":  "12000",
					"ratio":  "1.50",
					"big":    "1e3",
					"paging": "true",
					"owner":  "null",
					"tags":   `["a","b"]`,
					"where":  `{"dc":"fra","rack":7}`,
					"empty":  "",
				},
			},
		},
		{
			name: "numeric id, null from, empty attributes",
			body: `{"text": "x", "id": 1234567890123456789, "from": null, "attributes": {}}`,
			want: Body{Text: "x", ID: "1234567890123456789", Format: FormatEnvelope},
		},
		{
			name: "null attributes, escapes decoded",
			body: `{"text": "caf\u00e9 \ud83d\ude00 line\nbreak", "attributes": null}`,
			want: Body{Text: "café 😀 line\nbreak", Format: FormatEnvelope},
		},
		{
			name: "an envelope that mentions alerts is not Alertmanager",
			body: `{"text": "three alerts", "alerts": "3", "status": "firing"}`,
			want: Body{Text: "three alerts", Format: FormatEnvelope},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := ParseBody([]byte(tt.body), 0)
			if err != nil {
				t.Fatal(err)
			}
			if !bodiesEqual(b, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", b, tt.want)
			}
		})
	}
}

func TestTruncateRunes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "ab…"},
		{"ééééé", 4, "ééé…"},
		{"abc", 1, "…"},
		{"abc", 0, ""},
	}
	for _, tt := range tests {
		if got := truncateRunes(tt.s, tt.n); got != tt.want {
			t.Errorf("truncateRunes(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func bodiesEqual(a, b Body) bool {
	return a.Text == b.Text && a.ID == b.ID && a.From == b.From && a.Format == b.Format &&
		a.AllResolved == b.AllResolved && maps.Equal(a.Attributes, b.Attributes) &&
		(a.Attributes == nil) == (b.Attributes == nil)
}

func ExampleParseBody() {
	b, err := ParseBody([]byte(`{"text": "disk 91% on db-1", "id": "evt-7", "from": "watcher", "attributes": {"host": "db-1", "pct": 91}}`), 65536)
	if err != nil {
		panic(err)
	}
	fmt.Println(b.Format, b.ID, b.From, b.Attributes["pct"])
	fmt.Println(b.Text)

	_, err = ParseBody([]byte("\t \n"), 65536)
	var rej *RejectError
	if errors.As(err, &rej) {
		fmt.Println(rej.Reason)
	}
	// Output:
	// envelope evt-7 watcher 91
	// disk 91% on db-1
	// empty
}

// parseGeneral parses data as an object without the fast path.
func parseGeneral(data []byte) (Body, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return Body{}, err
	}
	if isAlertmanager(fields) {
		return parseAlertmanager(data, 0)
	}
	b, rej := parseEnvelope(fields)
	if rej != nil {
		return Body{}, rej
	}
	return b, nil
}

func FuzzParseBody(f *testing.F) {
	seeds := []string{
		`{"text": "hi", "id": "a-1", "from": "am", "attributes": {"k": "v", "k": "w"}}`,
		`{"text": "a", "text": "b"}`, `{"Text": "x", "text": "y"}`, `{"text": "esc \" \u00e9 \ud83d\ude00"}`,
		`{"text": "x", "attributes": {}}`, `{"text": " x ", "id": " 7 "}`, `{"text":"x","extra":"y"}`,
		"", " ", "hello", "\ufeff{}", "{", "[1]", `"x"`, "\xff",
		`{"text": "hi", "id": 7, "from": "me", "attributes": {"a": 1, "b": [true], "c": null}}`,
		`{"text": ""}`, `{"text": 1}`, `{"text": "a", "id": {}}`, `{"text": "\u0000\ud800"}`,
		`{"status": "firing", "alerts": []}`,
		`{"status": "resolved", "alerts": [{"status": "resolved", "labels": {"alertname": "A"}, "endsAt": "2026-01-01T00:00:00Z"}]}`,
		`{"status": "firing", "truncatedAlerts": -4, "alerts": [{"status": "", "labels": {"": ""}, "annotations": {"summary": "\n"}, "startsAt": "soon"}]}`,
		`{"status": "firing", "alerts": [{"labels": {"a": 1}}]}`,
	}
	if fixture, err := os.ReadFile("testdata/alertmanager_firing.json"); err == nil {
		seeds = append(seeds, string(fixture))
	}
	for _, s := range seeds {
		f.Add([]byte(s), 0)
		f.Add([]byte(s), 16)
	}
	f.Fuzz(func(t *testing.T, data []byte, maxBytes int) {
		if fb, ok := fastEnvelope(data); ok && utf8.Valid(data) {
			// The fast path must agree with the general one.
			gb, err := parseGeneral(data)
			if err != nil || !reflect.DeepEqual(fb, gb) {
				t.Fatalf("fast path %+v, general path %+v (%v) for %q", fb, gb, err, data)
			}
		}
		b, err := ParseBody(data, maxBytes)
		if err != nil {
			var rej *RejectError
			if !errors.As(err, &rej) {
				t.Fatalf("error %T %v is not a *RejectError", err, err)
			}
			if !slices.Contains(rejectReasons, rej.Reason) {
				t.Fatalf("unknown reason %q", rej.Reason)
			}
			if !utf8.ValidString(rej.Detail) {
				t.Fatalf("detail is not valid UTF-8: %q", rej.Detail)
			}
			if rej.Reason == RejectInvalidJSON && len(rej.Detail) > maxJSONDetail {
				t.Fatalf("invalid_json detail is %d bytes", len(rej.Detail))
			}
			return
		}
		if strings.TrimSpace(b.Text) == "" {
			t.Fatalf("accepted body with blank Text: %+v", b)
		}
		for _, s := range append([]string{b.Text, b.ID, b.From}, slices.Collect(maps.Values(b.Attributes))...) {
			if !utf8.ValidString(s) {
				t.Fatalf("accepted body has invalid UTF-8 %q", s)
			}
		}
		switch b.Format {
		case FormatText, FormatEnvelope:
			if b.AllResolved {
				t.Fatalf("AllResolved set on a %s body", b.Format)
			}
		case FormatAlertmanager:
			if !strings.HasPrefix(b.ID, "alertmanager:") || b.From != "alertmanager" {
				t.Fatalf("alertmanager body with ID %q From %q", b.ID, b.From)
			}
		default:
			t.Fatalf("unknown format %q", b.Format)
		}
	})
}

func BenchmarkParseBodyEnvelope(b *testing.B) {
	data := []byte(`{"text": "FIRING cpu high on web-3: 97% for 10m", "id": "a-123", "from": "alertmanager", "attributes": {"severity": "critical", "cluster": "payments"}}`)
	for b.Loop() {
		if _, err := ParseBody(data, 65536); err != nil {
			b.Fatal(err)
		}
	}
}
