package inbox

import (
	"encoding/json"
	"strings"
)

// fastEnvelope decodes the common envelope — a flat JSON object whose
// "text", "id" and "from" are strings and whose "attributes" is an object
// of strings — in one pass without reflection, because every message
// arriving on NATS goes through here. It accepts only what the general
// path would accept to the same Body (keys matched exactly, the last of
// duplicate keys winning, no "alerts" key, non-blank text); for anything
// else it reports false and the general path decides, with its precise
// errors. FuzzParseBody checks the two agree.
func fastEnvelope(data []byte) (Body, bool) {
	p := scanner{data: data}
	if !p.byte('{') {
		return Body{}, false
	}
	var f envelopeFields
	first := true
	for {
		p.space()
		if p.peek() == '}' && first {
			p.i++
			break
		}
		if !p.envelopeField(&f) {
			return Body{}, false
		}
		first = false
		more, ok := p.objectNext()
		if !ok {
			return Body{}, false
		}
		if !more {
			break
		}
	}
	p.space()
	if p.i != len(data) {
		return Body{}, false
	}
	return f.body()
}

// envelopeFields holds what fastEnvelope has read so far. The strings are
// values with has* flags rather than pointers so that nothing in the
// object loop has to move to the heap.
type envelopeFields struct {
	text, id, from          string
	hasText, hasID, hasFrom bool
	attrs                   map[string]string
}

// body turns the fields into the Body the general path would build, or
// reports false where the general path must decide (no or blank text).
func (f *envelopeFields) body() (Body, bool) {
	if !f.hasText {
		return Body{}, false
	}
	t := strings.TrimSpace(f.text)
	if t == "" {
		return Body{}, false
	}
	b := Body{Text: t, Format: FormatEnvelope}
	if f.hasID {
		b.ID = strings.TrimSpace(f.id)
	}
	if f.hasFrom {
		b.From = strings.TrimSpace(f.from)
	}
	if len(f.attrs) > 0 {
		b.Attributes = f.attrs
	}
	return b, true
}

// envelopeField reads one `"key": value` member of the envelope into f.
// It reports false for anything the fast path does not handle: an
// "alerts" key (an Alertmanager payload) or a value of another JSON type,
// which the general path then judges.
func (s *scanner) envelopeField(f *envelopeFields) bool {
	key, ok := s.str()
	if !ok || !s.byte(':') {
		return false
	}
	s.space()
	switch key {
	case "alerts":
		return false
	case "attributes":
		f.attrs, ok = s.stringObject()
		return ok
	}
	v, ok := s.str()
	if !ok {
		return false // a number, null, object...: general path
	}
	switch key {
	case "text":
		f.text, f.hasText = v, true
	case "id":
		f.id, f.hasID = v, true
	case "from":
		f.from, f.hasFrom = v, true
	}
	return true
}

// stringObject reads a JSON object whose values are all strings, as the
// envelope's "attributes" must be; the last of duplicate keys wins, as in
// encoding/json. An empty object gives an empty, non-nil map.
func (s *scanner) stringObject() (map[string]string, bool) {
	if !s.byte('{') {
		return nil, false
	}
	m := map[string]string{}
	s.space()
	if s.peek() == '}' {
		s.i++
		return m, true
	}
	for {
		k, ok := s.str()
		if !ok || !s.byte(':') {
			return nil, false
		}
		s.space()
		v, ok := s.str()
		if !ok {
			return nil, false
		}
		m[k] = v
		more, ok := s.objectNext()
		if !ok {
			return nil, false
		}
		if !more {
			return m, true
		}
	}
}

// objectNext consumes what follows an object member: a comma (more
// members follow, and the whitespace after it) or the closing brace.
// Anything else is not JSON the fast path accepts.
func (s *scanner) objectNext() (more, ok bool) {
	s.space()
	if s.peek() == ',' {
		s.i++
		s.space()
		return true, true
	}
	return false, s.byte('}')
}

// scanner walks JSON bytes for fastEnvelope.
type scanner struct {
	data []byte
	i    int
}

func (s *scanner) peek() byte {
	if s.i < len(s.data) {
		return s.data[s.i]
	}
	return 0
}

func (s *scanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte consumes c after optional whitespace.
func (s *scanner) byte(c byte) bool {
	s.space()
	if s.peek() != c {
		return false
	}
	s.i++
	return true
}

// str reads a JSON string. Strings without escapes are sliced directly;
// escaped ones are decoded by encoding/json, so their meaning is exactly
// JSON's. Control characters make it fail (invalid JSON).
func (s *scanner) str() (string, bool) {
	s.space()
	if s.peek() != '"' {
		return "", false
	}
	start := s.i
	s.i++
	escaped := false
	for s.i < len(s.data) {
		c := s.data[s.i]
		switch {
		case c == '\\':
			escaped = true
			s.i += 2
			continue
		case c == '"':
			s.i++
			if !escaped {
				return string(s.data[start+1 : s.i-1]), true
			}
			var v string
			if json.Unmarshal(s.data[start:s.i], &v) != nil {
				return "", false
			}
			return v, true
		case c < 0x20:
			return "", false
		}
		s.i++
	}
	return "", false
}
