package inbox

import (
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

// Limits of the Alertmanager rendering: they keep one notification from
// filling a prompt, however large the alert group.
const (
	// amMaxAlerts is how many alerts are rendered; the rest are counted.
	amMaxAlerts = 50
	// amMaxLabels is how many labels besides alertname and severity an
	// alert line shows (and how many group labels the header shows).
	amMaxLabels = 8
	// amMaxNote bounds the summary or description, in runes.
	amMaxNote = 300
	// amMaxValue and amMaxName bound one label value and one label name.
	amMaxValue = 100
	amMaxName  = 60
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
}

type amAlert struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    string            `json:"startsAt"`
	EndsAt      string            `json:"endsAt"`
	Fingerprint string            `json:"fingerprint"`
}

// resolved reports whether the alert is resolved. Any other status, known
// or not, counts as firing: surfacing an odd alert beats hiding it.
func (a amAlert) resolved() bool {
	return strings.EqualFold(strings.TrimSpace(a.Status), "resolved")
}

// isAlertmanager reports whether a JSON object is an Alertmanager webhook
// payload: an "alerts" array and a "status" string.
func isAlertmanager(fields map[string]json.RawMessage) bool {
	return jsonKind(fields["alerts"]) == "an array" && jsonKind(fields["status"]) == "a string"
}

// parseAlertmanager decodes and renders an Alertmanager payload. lead is
// where data starts in the original body, for error offsets.
func parseAlertmanager(data []byte, lead int) (Body, *RejectError) {
	var p amPayload
	if err := json.Unmarshal(data, &p); err != nil {
		return Body{}, jsonReject("alertmanager payload", err, lead)
	}
	if len(p.Alerts) == 0 {
		return Body{}, reject(RejectNoText, "alertmanager payload has no alerts")
	}
	attrs := map[string]string{}
	for k, v := range map[string]string{
		"status":    p.Status,
		"receiver":  p.Receiver,
		"group_key": p.GroupKey,
		"alertname": p.CommonLabels["alertname"],
	} {
		if v = strings.TrimSpace(v); v != "" {
			attrs[k] = v
		}
	}
	allResolved := true
	for _, a := range p.Alerts {
		allResolved = allResolved && a.resolved()
	}
	return Body{
		Text:        p.render(),
		ID:          p.id(),
		From:        "alertmanager",
		Attributes:  attrs,
		Format:      FormatAlertmanager,
		AllResolved: allResolved,
	}, nil
}

// render writes the notification as the model reads it:
//
//	Alertmanager notification [FIRING:2, RESOLVED:1] receiver=oncall group={cluster="payments"}
//	- FIRING HighCPU severity=critical instance=web-3 job=node since 2026-11-29T07:58:00Z: CPU above 95% for 10m
//	- RESOLVED DiskFull severity=warning instance=db-1 since 2026-11-29T06:00:00Z (ended 2026-11-29T07:30:00Z): /var above 90%
//	(3 more alerts truncated by Alertmanager)
//
// Firing alerts come first, then resolved ones, each in input order. Labels
// shown in the group are not repeated on the alert lines.
func (p *amPayload) render() string {
	var firing, resolved []amAlert
	for _, a := range p.Alerts {
		if a.resolved() {
			resolved = append(resolved, a)
		} else {
			firing = append(firing, a)
		}
	}
	var b strings.Builder
	var counts []string
	if len(firing) > 0 {
		counts = append(counts, fmt.Sprintf("FIRING:%d", len(firing)))
	}
	if len(resolved) > 0 {
		counts = append(counts, fmt.Sprintf("RESOLVED:%d", len(resolved)))
	}
	fmt.Fprintf(&b, "Alertmanager notification [%s]", strings.Join(counts, ", "))
	if r := strings.TrimSpace(p.Receiver); r != "" {
		b.WriteString(" receiver=" + amValue(r))
	}
	inGroup := map[string]string{}
	if len(p.GroupLabels) > 0 {
		var group []string
		for k, v := range sorted(p.GroupLabels) {
			if len(group) == amMaxLabels {
				group = append(group, fmt.Sprintf("+%d labels", len(p.GroupLabels)-amMaxLabels))
				break
			}
			group = append(group, amName(k)+"="+strconv.Quote(truncateRunes(v, amMaxValue)))
			inGroup[k] = v
		}
		b.WriteString(" group={" + strings.Join(group, ", ") + "}")
	}
	for i, a := range slices.Concat(firing, resolved) {
		if i == amMaxAlerts {
			break
		}
		b.WriteString("\n")
		b.WriteString(a.line(inGroup))
	}
	if n := len(p.Alerts) - amMaxAlerts; n > 0 {
		fmt.Fprintf(&b, "\n(%s not shown)", moreAlerts(n))
	}
	if p.TruncatedAlerts > 0 {
		fmt.Fprintf(&b, "\n(%s truncated by Alertmanager)", moreAlerts(p.TruncatedAlerts))
	}
	return b.String()
}

// line renders one alert: status, alertname, severity, the other labels by
// name (those equal to a shown group label left out), start, end when
// resolved, and the summary or else the description.
func (a amAlert) line(inGroup map[string]string) string {
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
		if gv, ok := inGroup[k]; ok && gv == v {
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

// id derives the idempotency key: groupKey, status, and every alert's
// identity (fingerprint, or labels and start when there is none) with its
// own status, sorted. Every field is length-prefixed so no two different
// inputs hash the same bytes.
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
			writeField(&k, a.StartsAt)
		}
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
