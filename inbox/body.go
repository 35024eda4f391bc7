package inbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agent-worker/agent-worker/internal/textclip"
)

// Body is a parsed message body: what a NATS message or an HTTP request
// carried, reduced to what the inbox holds. Every string in a Body is valid
// UTF-8, and ParseBody never returns a Body with empty Text. Everything in
// it came from outside and is untrusted.
type Body struct {
	// Text is what the model will read: the envelope's "text" or the plain
	// body, trimmed of surrounding whitespace; for Alertmanager, the compact
	// rendering of the notification. Never empty.
	Text string
	// ID is the idempotency key: the envelope's "id" (trimmed), or for
	// Alertmanager one derived from the notification so that retries of the
	// same notification share it. "" when the sender gave none; plain text
	// never has one.
	ID string
	// From is the sender's self-declared name from the envelope's "from"
	// (trimmed), or "alertmanager" for Alertmanager payloads; "" if none.
	From string
	// Attributes are the envelope's "attributes". String values are kept as
	// they are; any other value is kept as its compact JSON text (1.50 →
	// "1.50", true → "true", null → "null", {"a": 1} → `{"a":1}`). For
	// Alertmanager: status, receiver, group_key, and alertname when all
	// alerts share one; each only when non-empty; and truncated, the count
	// of alerts left out, when ParseAlertmanager left any out. nil when
	// there are none.
	Attributes map[string]string
	// Format is how the body was read: FormatEnvelope, FormatText or
	// FormatAlertmanager.
	Format string
	// AllResolved is true for an Alertmanager notification whose alerts
	// (at least one) are all resolved; always false for other formats.
	AllResolved bool
}

// Body formats, the values of Body.Format.
const (
	// FormatEnvelope is a JSON object {"text", "id", "from", "attributes"}.
	FormatEnvelope = "envelope"
	// FormatText is a body taken as plain UTF-8 text.
	FormatText = "text"
	// FormatAlertmanager is an Alertmanager webhook payload.
	FormatAlertmanager = "alertmanager"
)

// Rejection reasons, the values of RejectError.Reason. The set is closed, so
// they are safe as metric label values (messages_rejected_total{reason}) and
// dead-letter reason headers.
const (
	// RejectTooLarge: the body is longer than the limit.
	RejectTooLarge = "too_large"
	// RejectInvalidUTF8: the body is not valid UTF-8.
	RejectInvalidUTF8 = "invalid_utf8"
	// RejectInvalidJSON: the body starts with '{' but is not one JSON
	// object, or a field has the wrong type (an envelope's "id",
	// "from" or "attributes", or any field of an Alertmanager payload).
	RejectInvalidJSON = "invalid_json"
	// RejectNoText: an envelope without a non-blank "text" string, or an
	// Alertmanager payload without alerts.
	RejectNoText = "no_text"
	// RejectEmpty: the body is empty or only whitespace.
	RejectEmpty = "empty"
)

// RejectError says why a body was refused. Reason is one of the Reject*
// constants; Detail is for people (logs, the dead-letter message) and is
// valid UTF-8, but its wording is not stable.
type RejectError struct {
	Reason string
	Detail string
}

// Error returns "<reason>: <detail>".
func (e *RejectError) Error() string { return e.Reason + ": " + e.Detail }

func reject(reason, format string, args ...any) *RejectError {
	return &RejectError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// maxJSONDetail bounds how much of a decoder's message a RejectError carries.
const maxJSONDetail = 200

// utf8BOM is skipped at the start of a body: some tools write one.
var utf8BOM = []byte("\xef\xbb\xbf")

// ParseBody reads a message body. Checks run in this order, and the first
// that fails decides the rejection:
//
//  1. maxBytes > 0 and len(data) > maxBytes: RejectTooLarge (maxBytes <= 0
//     means no limit).
//  2. data is not valid UTF-8: RejectInvalidUTF8, with the byte offset of
//     the first bad byte.
//  3. Nothing but whitespace (and a leading byte-order mark): RejectEmpty.
//  4. The trimmed body starts with '{': it must be exactly one JSON object
//     (RejectInvalidJSON otherwise). An object whose "alerts" is an array
//     and whose "status" is a string is an Alertmanager webhook payload
//     (see the Alertmanager rules below); any other object is an envelope
//     {"text", "id", "from", "attributes"} whose "text" must be a string
//     that is not blank (RejectNoText otherwise). Field names are
//     case-sensitive and unknown fields are ignored. "id" and "from" may be
//     strings or numbers (kept as their JSON text) or null; "attributes" an
//     object or null.
//  5. Anything else — including bodies that start with '[' or are JSON
//     scalars — is plain text: only objects are parsed as JSON.
//
// An Alertmanager payload is rendered as compact, deterministic text for
// the model (see Body.Text): a header with the counts, receiver, group
// labels and common labels, then one line per alert, firing before
// resolved, each most severe and newest first. ParseBody shows every alert
// (the body is already bounded by maxBytes); ParseAlertmanager, for the
// HTTP receiver, shows as many as fit one message. A payload with no
// alerts is RejectNoText. Its ID is derived from the group key, status,
// and each alert's identity, status and startsAt, so Alertmanager's
// retries of one notification share an ID, while a change in the alert
// set, in any alert's status, or an alert that resolved and fired again
// (a new startsAt) gives a new one. A repeat notification
// (repeat_interval) with nothing changed cannot be told from a retry and
// gets the same ID too: how long that suppresses it is up to whoever
// dedups on the ID.
//
// The error, when not nil, is always a *RejectError. ParseBody never returns
// a Body with empty Text, never panics, and does not retain data.
func ParseBody(data []byte, maxBytes int) (Body, error) {
	if maxBytes > 0 && len(data) > maxBytes {
		return Body{}, reject(RejectTooLarge, "body is %d bytes, limit is %d", len(data), maxBytes)
	}
	if off := invalidUTF8Offset(data); off >= 0 {
		return Body{}, reject(RejectInvalidUTF8, "invalid UTF-8 at byte offset %d", off)
	}
	rest := bytes.TrimLeftFunc(bytes.TrimPrefix(data, utf8BOM), unicode.IsSpace)
	lead := len(data) - len(rest)
	trimmed := bytes.TrimRightFunc(rest, unicode.IsSpace)
	if len(trimmed) == 0 {
		return Body{}, reject(RejectEmpty, "body of %d bytes holds only whitespace", len(data))
	}
	if trimmed[0] != '{' {
		return Body{Text: string(trimmed), Format: FormatText}, nil
	}
	if b, ok := fastEnvelope(trimmed); ok {
		return b, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return Body{}, jsonReject("", err, lead)
	}
	if isAlertmanager(fields) {
		b, err := parseAlertmanager(trimmed, lead)
		if err != nil {
			return Body{}, err
		}
		return b, nil
	}
	b, err := parseEnvelope(fields)
	if err != nil {
		return Body{}, err
	}
	return b, nil
}

// parseEnvelope reads {"text", "id", "from", "attributes"} from an object
// already split into fields.
func parseEnvelope(fields map[string]json.RawMessage) (Body, *RejectError) {
	raw, ok := fields["text"]
	if !ok {
		return Body{}, reject(RejectNoText, `JSON object has no "text" field`)
	}
	if kind := jsonKind(raw); kind != "a string" {
		return Body{}, reject(RejectNoText, `"text" is %s, not a string`, kind)
	}
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		return Body{}, jsonReject(`"text"`, err, -1)
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return Body{}, reject(RejectNoText, `"text" is blank`)
	}
	b := Body{Text: text, Format: FormatEnvelope}
	var rej *RejectError
	if b.ID, rej = envelopeScalar(fields, "id"); rej != nil {
		return Body{}, rej
	}
	if b.From, rej = envelopeScalar(fields, "from"); rej != nil {
		return Body{}, rej
	}
	if b.Attributes, rej = envelopeAttributes(fields["attributes"]); rej != nil {
		return Body{}, rej
	}
	return b, nil
}

// envelopeScalar reads an optional string field that also accepts a number
// (as its JSON text) or null (as "").
func envelopeScalar(fields map[string]json.RawMessage, name string) (string, *RejectError) {
	raw, ok := fields[name]
	if !ok {
		return "", nil
	}
	switch kind := jsonKind(raw); kind {
	case "null":
		return "", nil
	case "a number":
		return string(bytes.TrimSpace(raw)), nil
	case "a string":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", jsonReject(fmt.Sprintf("%q", name), err, -1)
		}
		return strings.TrimSpace(s), nil
	default:
		return "", reject(RejectInvalidJSON, "%q is %s, want a string", name, kind)
	}
}

// envelopeAttributes reads "attributes": strings as they are, any other
// value as its compact JSON text.
func envelopeAttributes(raw json.RawMessage) (map[string]string, *RejectError) {
	if raw == nil {
		return nil, nil
	}
	switch kind := jsonKind(raw); kind {
	case "null":
		return nil, nil
	case "an object":
	default:
		return nil, reject(RejectInvalidJSON, `"attributes" is %s, want an object`, kind)
	}
	var values map[string]json.RawMessage
	if err := json.Unmarshal(raw, &values); err != nil {
		return nil, jsonReject(`"attributes"`, err, -1)
	}
	if len(values) == 0 {
		return nil, nil
	}
	attrs := make(map[string]string, len(values))
	for k, v := range values {
		if jsonKind(v) == "a string" {
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, jsonReject(fmt.Sprintf("attribute %q", k), err, -1)
			}
			attrs[k] = s
			continue
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, v); err != nil {
			return nil, jsonReject(fmt.Sprintf("attribute %q", k), err, -1)
		}
		attrs[k] = compact.String()
	}
	return attrs, nil
}

// jsonKind names the type of a JSON value by its first byte, for messages
// and dispatch; it does not validate.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// jsonReject turns a decoder error into RejectInvalidJSON. what names the
// part being decoded ("" for the whole body); lead, when >= 0, is where the
// decoded bytes start in the original body, so syntax errors can say where
// in the body they are.
func jsonReject(what string, err error, lead int) *RejectError {
	msg := err.Error()
	if se, ok := errors.AsType[*json.SyntaxError](err); ok && lead >= 0 {
		msg = fmt.Sprintf("%s (byte offset %d)", msg, lead+int(se.Offset))
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Type != nil {
		// The decoder's own words name Go types; say it in JSON's.
		msg = fmt.Sprintf("field %q is %s, want %s", te.Field, te.Value, jsonTypeName(te.Type))
	}
	if what != "" {
		msg = what + ": " + msg
	}
	return &RejectError{Reason: RejectInvalidJSON, Detail: textclip.Bytes(msg, maxJSONDetail, "")}
}

// jsonTypeName names the JSON type a Go type decodes from.
func jsonTypeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}

// invalidUTF8Offset returns the offset of the first byte that is not part
// of a valid UTF-8 sequence, or -1 when data is valid.
func invalidUTF8Offset(data []byte) int {
	if utf8.Valid(data) {
		return -1
	}
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// truncateRunes cuts s to at most n runes, the last of them "…" when
// anything was cut: the bound of the alert sources' labels and notes.
func truncateRunes(s string, n int) string { return textclip.RunesWithin(s, n, "…") }
