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
	var text, id, from *string
	var attrs map[string]string
	first := true
	for {
		p.space()
		if p.peek() == '}' && first {
			p.i++
			break
		}
		key, ok := p.str()
		if !ok || !p.byte(':') {
			return Body{}, false
		}
		p.space()
		switch key {
		case "alerts":
			return Body{}, false
		case "attributes":
			if !p.byte('{') {
				return Body{}, false
			}
			attrs = map[string]string{}
			p.space()
			if p.peek() == '}' {
				p.i++
				break
			}
			for {
				k, ok := p.str()
				if !ok || !p.byte(':') {
					return Body{}, false
				}
				p.space()
				v, ok := p.str()
				if !ok {
					return Body{}, false
				}
				attrs[k] = v
				p.space()
				if p.peek() == ',' {
					p.i++
					p.space()
					continue
				}
				if !p.byte('}') {
					return Body{}, false
				}
				break
			}
		default:
			v, ok := p.str()
			if !ok {
				return Body{}, false // a number, null, object...: general path
			}
			switch key {
			case "text":
				text = &v
			case "id":
				id = &v
			case "from":
				from = &v
			}
		}
		first = false
		p.space()
		if p.peek() == ',' {
			p.i++
			continue
		}
		if !p.byte('}') {
			return Body{}, false
		}
		break
	}
	p.space()
	if p.i != len(data) || text == nil {
		return Body{}, false
	}
	t := strings.TrimSpace(*text)
	if t == "" {
		return Body{}, false
	}
	b := Body{Text: t, Format: FormatEnvelope}
	if id != nil {
		b.ID = strings.TrimSpace(*id)
	}
	if from != nil {
		b.From = strings.TrimSpace(*from)
	}
	if len(attrs) > 0 {
		b.Attributes = attrs
	}
	return b, true
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
