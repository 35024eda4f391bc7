package inbox

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// ViaAlertmanager is Message.Via of a notification that came through the
// worker's Alertmanager receiver (POST /v1/alertmanager/{agent}): the
// driver wakes the agent with the alertmanager source for it.
const ViaAlertmanager = "alertmanager"

// AttrTruncated is the attribute that counts the alerts of a notification
// the rendering left out to fit one message (see ParseAlertmanager).
const AttrTruncated = "truncated"

// Limits of the Alertmanager rendering: they keep each line of a
// notification short, however large its labels and annotations. How many
// alerts are shown is decided by size (ParseAlertmanager), not here.
const (
	// amMaxLabels is how many labels besides alertname and severity an
	// alert line shows (and how many group and common labels the header
	// shows).
	amMaxLabels = 8
	// amMaxNote bounds the summary or description, in runes.
	amMaxNote = 300
	// amMaxValue and amMaxName bound one label value and one label name.
	amMaxValue = 100
	amMaxName  = 60
	// amMaxAttr bounds the receiver and group_key attributes, in runes.
	amMaxAttr = 256
)

// amPayload is the part of an Alertmanager webhook payload (version 4) the
// rendering and the ID use. Fields it does not use (version, externalURL,
// commonAnnotations, generatorURL, and the extras Grafana adds) are not
// decoded, so they cannot cause a rejection.
type amPayload struct {
	GroupKey        string            `json:"groupKey"`
	TruncatedAlerts int               `json:"truncatedAlerts"`
	Status          string            `json:"status"`
	Receiver        string            `json:"receiver"`
	GroupLabels     map[string]string `json:"groupLabels"`
	CommonLabels    map[string]string `json:"commonLabels"`
	Alerts          []amAlert         `json:"alerts"`

	// heading starts the rendering's header; "" is "Alertmanager
	// notification" (ParseGrafana sets its own).
	heading string
}

type amAlert struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    string            `json:"startsAt"`
	EndsAt      string            `json:"endsAt"`
	Fingerprint string            `json:"fingerprint"`

	// values is shown on the alert's line as values=...; "" shows
	// nothing (ParseGrafana sets it from Grafana's values).
	values string
}

// resolved reports whether the alert is resolved. Any other status, known
// or not, counts as firing: surfacing an odd alert beats hiding it.
func (a amAlert) resolved() bool {
	return strings.EqualFold(strings.TrimSpace(a.Status), "resolved")
}

// Severities in the order alerts are kept when not all fit: the value of
// the severity label (case-insensitive); any other value, or none, ranks
// last as "none".
var amSeverities = []string{"critical", "error", "warning", "info", "none"}

// severity returns the alert's rank in amSeverities.
func (a amAlert) severity() int {
	switch strings.ToLower(strings.TrimSpace(a.Labels["severity"])) {
	case "critical":
		return 0
	case "error":
		return 1
	case "warning":
		return 2
	case "info":
		return 3
	}
	return 4
}

// started parses startsAt; the zero time when it is missing or malformed,
// which ranks as the oldest.
func (a amAlert) started() time.Time {
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(a.StartsAt))
	if err != nil {
		return time.Time{}
	}
	return t
}

// isAlertmanager reports whether a JSON object is an Alertmanager webhook
// payload: an "alerts" array and a "status" string.
func isAlertmanager(fields map[string]json.RawMessage) bool {
	return jsonKind(fields["alerts"]) == "an array" && jsonKind(fields["status"]) == "a string"
}

// decodeAlertmanager decodes a payload already known to be one. lead is
// where data starts in the original body, for error offsets.
func decodeAlertmanager(data []byte, lead int) (*amPayload, *RejectError) {
	var p amPayload
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, jsonReject("alertmanager payload", err, lead)
	}
	if len(p.Alerts) == 0 {
		return nil, reject(RejectNoText, "alertmanager payload has no alerts")
	}
	return &p, nil
}

// parseAlertmanager decodes and renders an Alertmanager payload with every
// alert shown (ParseBody: the body is bounded by its caller's limit).
func parseAlertmanager(data []byte, lead int) (Body, *RejectError) {
	p, rej := decodeAlertmanager(data, lead)
	if rej != nil {
		return Body{}, rej
	}
	return p.prepare().body(len(p.Alerts)), nil
}

// AlertmanagerNotification is one Alertmanager notification as
// ParseAlertmanager read it.
type AlertmanagerNotification struct {
	// Body is what to queue: Text, ID, From, Attributes, Format and
	// AllResolved as ParseBody sets them for an Alertmanager payload.
	Body Body
	// GroupKey is the payload's groupKey, whole (the group_key attribute
	// is bounded).
	GroupKey string
	// Alerts counts the payload's alerts; Truncated how many of them
	// Body.Text leaves out (also the "truncated" attribute when > 0).
	Alerts    int
	Truncated int
}

// ParseAlertmanager reads an Alertmanager webhook payload (version 4), as
// ParseBody does, and renders as many of its alerts as fit: fits reports
// whether a candidate Body is small enough (the receiver checks the
// message it would publish), nil accepts any. When not every alert fits,
// the alerts kept are the most severe (severity label critical, error,
// warning, info, then any other value or none), then the newest (latest
// startsAt first), then firing before resolved; the text ends with a line
// "(N more alerts not shown: <count per severity>; <count per status>)"
// and the attribute "truncated" is N. The header always counts every
// alert.
//
// Errors are *RejectError: anything but a JSON object with an "alerts"
// array and a "status" string, malformed JSON, or no alerts is
// RejectInvalidJSON or RejectNoText; a payload that does not fit even
// with no alert line is RejectTooLarge. No size limit applies to data
// here: the caller bounds what it reads.
func ParseAlertmanager(data []byte, fits func(Body) bool) (AlertmanagerNotification, error) {
	p, _, rej := readAlertmanager(data, "an Alertmanager webhook payload", "(webhook version 4)")
	if rej != nil {
		return AlertmanagerNotification{}, rej
	}
	return p.fit(fits)
}

// readAlertmanager checks and decodes a body that must be an
// Alertmanager-shaped payload — what, named in errors, with hint after
// the shape wanted — and returns it with its trimmed JSON.
func readAlertmanager(data []byte, what, hint string) (*amPayload, []byte, *RejectError) {
	if off := invalidUTF8Offset(data); off >= 0 {
		return nil, nil, reject(RejectInvalidUTF8, "invalid UTF-8 at byte offset %d", off)
	}
	rest := bytes.TrimLeftFunc(bytes.TrimPrefix(data, utf8BOM), unicode.IsSpace)
	lead := len(data) - len(rest)
	trimmed := bytes.TrimRightFunc(rest, unicode.IsSpace)
	if len(trimmed) == 0 {
		return nil, nil, reject(RejectEmpty, "body of %d bytes holds only whitespace", len(data))
	}
	var fields map[string]json.RawMessage
	if trimmed[0] != '{' {
		return nil, nil, reject(RejectInvalidJSON, `not %s: want a JSON object with "status" and "alerts" %s`, what, hint)
	}
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return nil, nil, jsonReject("", err, lead)
	}
	if !isAlertmanager(fields) {
		return nil, nil, reject(RejectInvalidJSON, `not %s: want a JSON object with "status" (a string) and "alerts" (an array) %s`, what, hint)
	}
	p, rej := decodeAlertmanager(trimmed, lead)
	if rej != nil {
		return nil, nil, rej
	}
	return p, trimmed, nil
}

// fit renders p with as many alerts as fits accepts (ParseAlertmanager).
func (p *amPayload) fit(fits func(Body) bool) (AlertmanagerNotification, error) {
	r := p.prepare()
	n := len(p.Alerts)
	out := AlertmanagerNotification{GroupKey: p.GroupKey, Alerts: n}
	if fits == nil {
		fits = func(Body) bool { return true }
	}
	if b := r.body(n); fits(b) {
		out.Body = b
		return out, nil
	}
	// The largest count of alerts that fits, by bisection: the size grows
	// with each alert shown (the summary line shrinks by a few bytes at
	// most), and the result is checked, so it always fits.
	lo, hi := 0, n // fits(lo) once checked; !fits(hi)
	b := r.body(0)
	if !fits(b) {
		return AlertmanagerNotification{}, reject(RejectTooLarge, "the notification does not fit one message even with none of its %d alerts shown", n)
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if c := r.body(mid); fits(c) {
			lo, b = mid, c
		} else {
			hi = mid
		}
	}
	out.Body, out.Truncated = b, n-lo
	return out, nil
}

// amRendering is a payload prepared for rendering any number of its
// alerts: the header and every alert's line are rendered once.
type amRendering struct {
	p      *amPayload
	header string
	// keep is the alerts' indexes in the order they are kept.
	keep  []int
	lines []string // by alert index
	attrs map[string]string
	id    string
	// allResolved: every alert is resolved.
	allResolved bool
	truncated   string // the Alertmanager truncation line, or ""
}

// prepare renders the parts every body of p shares.
func (p *amPayload) prepare() *amRendering {
	r := &amRendering{p: p, id: p.id(), allResolved: true, lines: make([]string, len(p.Alerts))}
	firing := 0
	for _, a := range p.Alerts {
		r.allResolved = r.allResolved && a.resolved()
		if !a.resolved() {
			firing++
		}
	}
	var b strings.Builder
	var counts []string
	if firing > 0 {
		counts = append(counts, fmt.Sprintf("FIRING:%d", firing))
	}
	if resolved := len(p.Alerts) - firing; resolved > 0 {
		counts = append(counts, fmt.Sprintf("RESOLVED:%d", resolved))
	}
	heading := p.heading
	if heading == "" {
		heading = "Alertmanager notification"
	}
	fmt.Fprintf(&b, "%s [%s]", heading, strings.Join(counts, ", "))
	if rc := strings.TrimSpace(p.Receiver); rc != "" {
		b.WriteString(" receiver=" + amValue(rc))
	}
	// Labels shown once in the header are not repeated on the alert lines
	// that carry them with the same value.
	shown := map[string]string{}
	if group := labelSet(p.GroupLabels, nil, shown); group != "" {
		b.WriteString(" group={" + group + "}")
	}
	// Common labels only pay off with more than one alert line.
	if len(p.Alerts) > 1 {
		if common := labelSet(p.CommonLabels, func(k string) bool {
			_, inGroup := p.GroupLabels[k]
			return k == "alertname" || k == "severity" || inGroup
		}, shown); common != "" {
			b.WriteString(" common={" + common + "}")
		}
	}
	r.header = b.String()
	for i, a := range p.Alerts {
		r.lines[i] = a.line(shown)
	}
	r.keep = make([]int, len(p.Alerts))
	for i := range r.keep {
		r.keep[i] = i
	}
	slices.SortStableFunc(r.keep, func(i, j int) int {
		a, b := p.Alerts[i], p.Alerts[j]
		if c := cmp.Compare(a.severity(), b.severity()); c != 0 {
			return c
		}
		if c := b.started().Compare(a.started()); c != 0 {
			return c // newest first
		}
		return cmp.Compare(boolRank(a.resolved()), boolRank(b.resolved()))
	})
	if p.TruncatedAlerts > 0 {
		r.truncated = fmt.Sprintf("(%s truncated by Alertmanager)", moreAlerts(p.TruncatedAlerts))
	}
	r.attrs = map[string]string{}
	for k, v := range map[string]string{
		"status":    p.Status,
		"receiver":  truncateRunes(p.Receiver, amMaxAttr),
		"group_key": truncateRunes(p.GroupKey, amMaxAttr),
		"alertname": truncateRunes(p.CommonLabels["alertname"], amMaxValue),
	} {
		if v = strings.TrimSpace(v); v != "" {
			r.attrs[k] = v
		}
	}
	return r
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// labelSet renders labels for the header as k="v", at most amMaxLabels of
// them, leaving out those skip names, and notes the ones shown in shown.
func labelSet(labels map[string]string, skip func(string) bool, shown map[string]string) string {
	var out []string
	total := 0
	for k, v := range sorted(labels) {
		if skip != nil && skip(k) {
			continue
		}
		total++
		if len(out) == amMaxLabels {
			continue
		}
		out = append(out, amName(k)+"="+strconv.Quote(truncateRunes(v, amMaxValue)))
		shown[k] = v
	}
	if total > amMaxLabels {
		out = append(out, fmt.Sprintf("+%d labels", total-amMaxLabels))
	}
	return strings.Join(out, ", ")
}

// body renders the notification with the first shown alerts of the keep
// order:
//
//	Alertmanager notification [FIRING:2, RESOLVED:1] receiver=oncall group={cluster="payments"} common={job="node"}
//	- FIRING HighCPU severity=critical instance=web-3 since 2026-11-29T07:58:00Z: CPU above 95% for 10m
//	- RESOLVED DiskFull severity=warning instance=db-1 since 2026-11-29T06:00:00Z (ended 2026-11-29T07:30:00Z): /var above 90%
//	(2 more alerts not shown: warning 1, info 1; firing 1, resolved 1)
//	(3 more alerts truncated by Alertmanager)
//
// The alerts shown are listed firing first, then resolved, each in keep
// order (most severe, then newest).
func (r *amRendering) body(shown int) Body {
	var b strings.Builder
	b.WriteString(r.header)
	kept := r.keep[:shown]
	for _, resolved := range []bool{false, true} {
		for _, i := range kept {
			if r.p.Alerts[i].resolved() == resolved {
				b.WriteString("\n")
				b.WriteString(r.lines[i])
			}
		}
	}
	attrs := make(map[string]string, len(r.attrs)+1)
	for k, v := range r.attrs {
		attrs[k] = v
	}
	if hidden := r.keep[shown:]; len(hidden) > 0 {
		fmt.Fprintf(&b, "\n(%s not shown: %s)", moreAlerts(len(hidden)), r.hiddenCounts(hidden))
		attrs[AttrTruncated] = strconv.Itoa(len(hidden))
	}
	if r.truncated != "" {
		b.WriteString("\n" + r.truncated)
	}
	if len(attrs) == 0 {
		attrs = nil
	}
	return Body{
		Text:        b.String(),
		ID:          r.id,
		From:        "alertmanager",
		Attributes:  attrs,
		Format:      FormatAlertmanager,
		AllResolved: r.allResolved,
	}
}

// hiddenCounts says what the alerts left out are: "critical 2, warning 5;
// firing 6, resolved 1", zero counts left out.
func (r *amRendering) hiddenCounts(hidden []int) string {
	sev := make([]int, len(amSeverities))
	firing := 0
	for _, i := range hidden {
		a := r.p.Alerts[i]
		sev[a.severity()]++
		if !a.resolved() {
			firing++
		}
	}
	var bySeverity, byStatus []string
	for i, n := range sev {
		if n > 0 {
			bySeverity = append(bySeverity, fmt.Sprintf("%s %d", amSeverities[i], n))
		}
	}
	if firing > 0 {
		byStatus = append(byStatus, fmt.Sprintf("firing %d", firing))
	}
	if resolved := len(hidden) - firing; resolved > 0 {
		byStatus = append(byStatus, fmt.Sprintf("resolved %d", resolved))
	}
	return strings.Join(bySeverity, ", ") + "; " + strings.Join(byStatus, ", ")
}

// line renders one alert: status, alertname, severity, the other labels by
// name (those shown in the header with the same value left out), start,
// end when resolved, and the summary or else the description.
func (a amAlert) line(inHeader map[string]string) string {
	status := "FIRING"
	if a.resolved() {
		status = "RESOLVED"
	}
	parts := []string{"-", status}
	if name := strings.TrimSpace(a.Labels["alertname"]); name != "" {
		parts = append(parts, amValue(name))
	}
	if sev, ok := a.Labels["severity"]; ok {
		parts = append(parts, "severity="+amValue(sev))
	}
	var labels []string
	for k, v := range sorted(a.Labels) {
		if k == "alertname" || k == "severity" {
			continue
		}
		if hv, ok := inHeader[k]; ok && hv == v {
			continue
		}
		labels = append(labels, amName(k)+"="+amValue(v))
	}
	if n := len(labels) - amMaxLabels; n > 0 {
		labels = append(labels[:amMaxLabels], fmt.Sprintf("+%d labels", n))
	}
	parts = append(parts, labels...)
	if start := amTime(a.StartsAt); start != "" {
		parts = append(parts, "since "+start)
	}
	if a.resolved() {
		if end := amTime(a.EndsAt); end != "" {
			parts = append(parts, "(ended "+end+")")
		}
	}
	if a.values != "" {
		parts = append(parts, "values="+a.values)
	}
	line := strings.Join(parts, " ")
	note := singleLine(a.Annotations["summary"])
	if note == "" {
		note = singleLine(a.Annotations["description"])
	}
	if note != "" {
		line += ": " + truncateRunes(note, amMaxNote)
	}
	return line
}

// id derives the idempotency key of a notification from what makes it
// new: the groupKey, the status, and every alert's identity (its
// fingerprint, or its labels when it has none), its own status and its
// startsAt (to the nanosecond, in UTC), sorted. An alert that resolves
// and fires again has a new startsAt, so the re-fired notification gets a
// new id; a retry or a repeat (repeat_interval) of the same alerts in the
// same state gets the same one. Every field is length-prefixed so no two
// different inputs hash the same bytes.
func (p *amPayload) id() string {
	keys := make([]string, len(p.Alerts))
	for i, a := range p.Alerts {
		var k strings.Builder
		status := "firing"
		if a.resolved() {
			status = "resolved"
		}
		writeField(&k, status)
		if a.Fingerprint != "" {
			writeField(&k, "fingerprint")
			writeField(&k, a.Fingerprint)
		} else {
			writeField(&k, "labels")
			for name, v := range sorted(a.Labels) {
				writeField(&k, name)
				writeField(&k, v)
			}
		}
		writeField(&k, "starts")
		writeField(&k, amInstant(a.StartsAt))
		keys[i] = k.String()
	}
	slices.Sort(keys)
	h := sha256.New()
	writeField(h, p.GroupKey)
	writeField(h, strings.ToLower(strings.TrimSpace(p.Status)))
	for _, k := range keys {
		writeField(h, k)
	}
	return "alertmanager:" + hex.EncodeToString(h.Sum(nil))[:16]
}

// amInstant is a timestamp for the id: RFC 3339 in UTC to the nanosecond,
// so one instant written two ways is one instant; the trimmed raw value
// when it does not parse.
func amInstant(s string) string {
	s = strings.TrimSpace(s)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// writeField writes s length-prefixed. Writes to a hash or a
// strings.Builder never fail.
func writeField(w io.Writer, s string) {
	_, _ = io.WriteString(w, strconv.Itoa(len(s))+":"+s)
}

// amTime renders a timestamp as RFC 3339 in UTC to the second; "" when it
// is missing or zero (Alertmanager's "0001-01-01T00:00:00Z" for "not
// ended"); the raw value, bounded and quoted if need be, when it does not
// parse.
func amTime(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return amValue(truncateRunes(s, 40))
	}
	if t.Year() <= 1 {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// amValue renders a label value on one line: bounded, and quoted when it
// is empty or holds anything that would make the line ambiguous.
func amValue(v string) string {
	v = truncateRunes(v, amMaxValue)
	if v == "" || strings.ContainsFunc(v, func(r rune) bool {
		return unicode.IsSpace(r) || !unicode.IsPrint(r) || strings.ContainsRune(`"=,\`, r)
	}) {
		return strconv.Quote(v)
	}
	return v
}

// amName renders a label name: bounded, with anything that could break
// the key=value shape replaced by '_'.
func amName(k string) string {
	k = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) || strings.ContainsRune(`"=,\`, r) {
			return '_'
		}
		return r
	}, truncateRunes(k, amMaxName))
	if k == "" {
		return "_"
	}
	return k
}

// singleLine collapses whitespace and control characters to single spaces.
func singleLine(s string) string {
	return strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)), " ")
}

func moreAlerts(n int) string {
	if n == 1 {
		return "1 more alert"
	}
	return fmt.Sprintf("%d more alerts", n)
}
