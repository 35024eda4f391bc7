package inbox

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestAlertmanagerFixtureRendersExactly(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/alertmanager_firing.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseBody(data, 65536)
	if err != nil {
		t.Fatal(err)
	}
	// Firing before resolved whatever the input order, newest first; the
	// group label (cluster) and the common labels only in the header;
	// times in UTC to the second; the description stands in for a missing
	// summary, on one line.
	const want = `Alertmanager notification [FIRING:2, RESOLVED:1] receiver=oncall group={cluster="payments"} common={job="node", prometheus="monitoring/k8s"}
- FIRING HighCPU severity=critical instance=web-4 since 2026-11-29T07:59:10Z: CPU above 95% for 10m
- FIRING HighCPU severity=critical instance=web-3 since 2026-11-29T07:58:00Z: CPU above 95% for 10m
- RESOLVED DiskFull severity=warning device=/dev/nvme0n1p2 instance=db-1 mountpoint=/var since 2026-11-29T06:00:00Z (ended 2026-11-29T07:30:00Z): /var on db-1 is above 90% (currently 91.2%)
(3 more alerts truncated by Alertmanager)`
	if b.Text != want {
		t.Errorf("Text:\n%s\nwant:\n%s", b.Text, want)
	}
	if b.Format != FormatAlertmanager || b.From != "alertmanager" || b.AllResolved {
		t.Errorf("Format %q From %q AllResolved %v, want alertmanager, alertmanager, false", b.Format, b.From, b.AllResolved)
	}
	// Pinned: a redelivery after an upgrade must still match the id a
	// previous version recorded. (It changed once, when startsAt joined
	// the id, so that a re-fired alert is a new notification.)
	if b.ID != "alertmanager:f7f0ebad32188d25" {
		t.Errorf("ID = %q, want the pinned alertmanager:f7f0ebad32188d25", b.ID)
	}
	wantAttrs := map[string]string{
		"status":    "firing",
		"receiver":  "oncall",
		"group_key": `{}/{team="payments"}:{cluster="payments"}`,
	}
	if !maps.Equal(b.Attributes, wantAttrs) {
		t.Errorf("Attributes = %v, want %v", b.Attributes, wantAttrs)
	}
}

// amAlertJSON and amPayloadJSON build payloads in the documented shape.
type amAlertJSON struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations,omitempty"`
	StartsAt    string            `json:"startsAt"`
	EndsAt      string            `json:"endsAt"`
	Fingerprint string            `json:"fingerprint,omitempty"`
}

type amPayloadJSON struct {
	Version         string            `json:"version"`
	GroupKey        string            `json:"groupKey"`
	TruncatedAlerts int               `json:"truncatedAlerts"`
	Status          string            `json:"status"`
	Receiver        string            `json:"receiver"`
	GroupLabels     map[string]string `json:"groupLabels"`
	CommonLabels    map[string]string `json:"commonLabels"`
	ExternalURL     string            `json:"externalURL"`
	Alerts          []amAlertJSON     `json:"alerts"`
}

func amTestAlert(status, name string, n int) amAlertJSON {
	a := amAlertJSON{
		Status:      status,
		Labels:      map[string]string{"alertname": name, "instance": fmt.Sprintf("host-%d", n)},
		StartsAt:    fmt.Sprintf("2026-11-29T07:%02d:00Z", n%60),
		EndsAt:      "0001-01-01T00:00:00Z",
		Fingerprint: fmt.Sprintf("%016x", n+1),
	}
	if status == "resolved" {
		a.EndsAt = "2026-11-29T09:00:00Z"
	}
	return a
}

func amTestPayload(alerts ...amAlertJSON) amPayloadJSON {
	status := "resolved"
	for _, a := range alerts {
		if !strings.EqualFold(a.Status, "resolved") {
			status = "firing"
		}
	}
	return amPayloadJSON{
		Version:  "4",
		GroupKey: `{}:{alertname="Test"}`,
		Status:   status,
		Receiver: "oncall",
		Alerts:   alerts,
	}
}

func parseAM(t *testing.T, p amPayloadJSON) Body {
	t.Helper()
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseBody(data, 0)
	if err != nil {
		t.Fatalf("ParseBody: %v", err)
	}
	if b.Format != FormatAlertmanager {
		t.Fatalf("Format = %q, want alertmanager", b.Format)
	}
	return b
}

func alertLines(text string) []string {
	var lines []string
	for l := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(l, "- ") {
			lines = append(lines, l)
		}
	}
	return lines
}

func TestAlertmanagerOrdersFiringBeforeResolved(t *testing.T) {
	t.Parallel()
	b := parseAM(t, amTestPayload(
		amTestAlert("resolved", "R1", 1),
		amTestAlert("firing", "F1", 2),
		amTestAlert("resolved", "R2", 3),
		amTestAlert("firing", "F2", 4),
		amTestAlert("pending", "Odd", 5), // not resolved: shown as firing
	))
	// Firing, then resolved; in each, newest first (no severity here).
	want := []string{
		"- FIRING Odd instance=host-5 since 2026-11-29T07:05:00Z",
		"- FIRING F2 instance=host-4 since 2026-11-29T07:04:00Z",
		"- FIRING F1 instance=host-2 since 2026-11-29T07:02:00Z",
		"- RESOLVED R2 instance=host-3 since 2026-11-29T07:03:00Z (ended 2026-11-29T09:00:00Z)",
		"- RESOLVED R1 instance=host-1 since 2026-11-29T07:01:00Z (ended 2026-11-29T09:00:00Z)",
	}
	if got := alertLines(b.Text); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("alert lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if header, _, _ := strings.Cut(b.Text, "\n"); header != "Alertmanager notification [FIRING:3, RESOLVED:2] receiver=oncall" {
		t.Fatalf("header = %q", header)
	}
}

func TestAlertmanagerLabelCap(t *testing.T) {
	t.Parallel()
	a := amTestAlert("firing", "Many", 0)
	a.Labels = map[string]string{"alertname": "Many", "severity": "page"}
	for _, k := range []string{"l", "k", "j", "i", "h", "g", "f", "e", "d", "c", "b", "a"} {
		a.Labels[k] = "v" + k
	}
	p := amTestPayload(a)
	p.GroupLabels = map[string]string{"a": "va", "b": "other"} // a is left out, b differs
	b := parseAM(t, p)
	want := `- FIRING Many severity=page b=vb c=vc d=vd e=ve f=vf g=vg h=vh i=vi +3 labels since 2026-11-29T07:00:00Z`
	if got := alertLines(b.Text); len(got) != 1 || got[0] != want {
		t.Fatalf("alert lines = %q, want [%q]", got, want)
	}
}

func TestAlertmanagerGroupLabelCap(t *testing.T) {
	t.Parallel()
	p := amTestPayload(amTestAlert("firing", "G", 0))
	p.GroupLabels = map[string]string{}
	for i := range 10 {
		p.GroupLabels[fmt.Sprintf("k%d", i)] = "v"
	}
	b := parseAM(t, p)
	want := `group={k0="v", k1="v", k2="v", k3="v", k4="v", k5="v", k6="v", k7="v", +2 labels}`
	if header, _, _ := strings.Cut(b.Text, "\n"); !strings.HasSuffix(header, " "+want) {
		t.Fatalf("header = %q, want it to end with %q", header, want)
	}
}

// ParseBody shows every alert: its body is already bounded by the NATS
// limit, so nothing is left out and no truncated attribute is set.
func TestAlertmanagerParseBodyShowsEveryAlert(t *testing.T) {
	t.Parallel()
	var alerts []amAlertJSON
	for i := range 120 {
		alerts = append(alerts, amTestAlert("firing", fmt.Sprintf("A%03d", i), i))
	}
	p := amTestPayload(alerts...)
	p.TruncatedAlerts = 1
	b := parseAM(t, p)
	if n := len(alertLines(b.Text)); n != 120 {
		t.Fatalf("%d alert lines, want 120", n)
	}
	if strings.Contains(b.Text, "not shown") || b.Attributes[AttrTruncated] != "" {
		t.Fatalf("ParseBody left alerts out: %q", b.Attributes)
	}
	if !strings.HasSuffix(b.Text, "\n(1 more alert truncated by Alertmanager)") {
		t.Fatalf("text ends %q", b.Text[len(b.Text)-60:])
	}
}

func TestAlertmanagerAlertLine(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("ab ", 200)
	tests := []struct {
		name  string
		alert amAlertJSON
		want  string
	}{
		{
			name: "summary preferred, single-lined",
			alert: amAlertJSON{Status: "firing", Labels: map[string]string{"alertname": "X"},
				Annotations: map[string]string{"summary": " first\n\tsecond\r\n", "description": "not this"},
				StartsAt:    "2026-11-29T07:00:00.999999999+02:00", EndsAt: "2026-11-29T07:10:00Z"},
			want: "- FIRING X since 2026-11-29T05:00:00Z: first second",
		},
		{
			name: "blank summary falls back to description",
			alert: amAlertJSON{Status: "resolved", Labels: map[string]string{"alertname": "X"},
				Annotations: map[string]string{"summary": "  ", "description": "desc"},
				StartsAt:    "2026-11-29T07:00:00Z", EndsAt: "0001-01-01T00:00:00Z"},
			want: "- RESOLVED X since 2026-11-29T07:00:00Z: desc",
		},
		{
			name: "note truncated to 300 runes",
			alert: amAlertJSON{Status: "firing", Labels: map[string]string{"alertname": "X"},
				Annotations: map[string]string{"summary": long}},
			want: "- FIRING X: " + strings.Repeat("ab ", 99) + "ab…",
		},
		{
			name: "awkward values quoted, names defused, no alertname",
			alert: amAlertJSON{Status: "firing",
				Labels:   map[string]string{"path": "/a b", "empty": "", "q": `say "hi"`, "bad key": "x=y", "ok": "plain"},
				StartsAt: "yesterday"},
			want: `- FIRING bad_key="x=y" empty="" ok=plain path="/a b" q="say \"hi\"" since yesterday`,
		},
		{
			name: "alertname with spaces (Grafana) is quoted",
			alert: amAlertJSON{Status: "firing",
				Labels: map[string]string{"alertname": "High memory usage", "severity": "critical"}},
			want: `- FIRING "High memory usage" severity=critical`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := parseAM(t, amTestPayload(tt.alert))
			if got := alertLines(b.Text); len(got) != 1 || got[0] != tt.want {
				t.Fatalf("alert lines = %q\nwant [%q]", got, tt.want)
			}
		})
	}
}

func TestAlertmanagerID(t *testing.T) {
	t.Parallel()
	base := func() amPayloadJSON {
		return amTestPayload(amTestAlert("firing", "A", 1), amTestAlert("firing", "B", 2))
	}
	baseID := parseAM(t, base()).ID
	if !strings.HasPrefix(baseID, "alertmanager:") || len(baseID) != len("alertmanager:")+16 {
		t.Fatalf("ID = %q, want alertmanager: and 16 hex digits", baseID)
	}
	tests := []struct {
		name   string
		change func(p *amPayloadJSON)
		same   bool
	}{
		{"same payload again (a retry)", func(p *amPayloadJSON) {}, true},
		{"alerts in another order", func(p *amPayloadJSON) { p.Alerts[0], p.Alerts[1] = p.Alerts[1], p.Alerts[0] }, true},
		{"fields the id ignores", func(p *amPayloadJSON) {
			p.Receiver, p.ExternalURL, p.TruncatedAlerts = "other", "http://x", 2
			p.Alerts[0].Annotations = map[string]string{"summary": "changed"}
		}, true},
		{"status", func(p *amPayloadJSON) { p.Status = "resolved" }, false},
		{"one alert resolved", func(p *amPayloadJSON) { p.Alerts[1].Status = "resolved" }, false},
		{"alert added", func(p *amPayloadJSON) { p.Alerts = append(p.Alerts, amTestAlert("firing", "C", 3)) }, false},
		{"alert removed", func(p *amPayloadJSON) { p.Alerts = p.Alerts[:1] }, false},
		{"group key", func(p *amPayloadJSON) { p.GroupKey = `{}:{alertname="Other"}` }, false},
		{"fingerprint", func(p *amPayloadJSON) { p.Alerts[0].Fingerprint = "ffffffffffffffff" }, false},
		// An alert that resolved and fired again: same fingerprint, a new
		// startsAt. It is a new notification, not a repeat.
		{"re-fired (new startsAt)", func(p *amPayloadJSON) { p.Alerts[0].StartsAt = "2026-11-29T08:15:00Z" }, false},
		{"startsAt to the nanosecond", func(p *amPayloadJSON) { p.Alerts[0].StartsAt = "2026-11-29T07:01:00.000000001Z" }, false},
		// One instant written another way is the same alert.
		{"startsAt in another zone", func(p *amPayloadJSON) { p.Alerts[0].StartsAt = "2026-11-29T08:01:00+01:00" }, true},
		// A repeat (repeat_interval) of a group still firing: same alerts,
		// same startsAt; only what the id ignores may differ.
		{"repeat with a new endsAt and annotations", func(p *amPayloadJSON) {
			p.Alerts[1].EndsAt = "2026-11-29T12:00:00Z"
			p.Alerts[1].Annotations = map[string]string{"description": "value now 99%"}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := base()
			tt.change(&p)
			if id := parseAM(t, p).ID; (id == baseID) != tt.same {
				t.Fatalf("ID %q vs base %q: same = %v, want %v", id, baseID, id == baseID, tt.same)
			}
		})
	}
}

func TestAlertmanagerIDWithoutFingerprints(t *testing.T) {
	t.Parallel()
	base := func() amPayloadJSON {
		a, b := amTestAlert("firing", "A", 1), amTestAlert("firing", "B", 2)
		a.Fingerprint, b.Fingerprint = "", ""
		return amTestPayload(a, b)
	}
	baseID := parseAM(t, base()).ID
	tests := []struct {
		name   string
		change func(p *amPayloadJSON)
		same   bool
	}{
		{"same payload again", func(p *amPayloadJSON) {}, true},
		{"alerts in another order", func(p *amPayloadJSON) { p.Alerts[0], p.Alerts[1] = p.Alerts[1], p.Alerts[0] }, true},
		{"label value", func(p *amPayloadJSON) { p.Alerts[0].Labels["instance"] = "host-9" }, false},
		{"label added", func(p *amPayloadJSON) { p.Alerts[0].Labels["zone"] = "b" }, false},
		{"start time", func(p *amPayloadJSON) { p.Alerts[0].StartsAt = "2026-11-29T08:00:00Z" }, false},
		{"label split differently", func(p *amPayloadJSON) {
			// {instance: host-1} and {instanceh: ost-1} must not collide.
			delete(p.Alerts[0].Labels, "instance")
			p.Alerts[0].Labels["instanceh"] = "ost-1"
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := base()
			tt.change(&p)
			if id := parseAM(t, p).ID; (id == baseID) != tt.same {
				t.Fatalf("ID %q vs base %q: same = %v, want %v", id, baseID, id == baseID, tt.same)
			}
		})
	}
}

func TestAlertmanagerAllResolvedAndAttributes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		alerts      []amAlertJSON
		common      map[string]string
		allResolved bool
		attrs       map[string]string
	}{
		{
			name:        "all resolved",
			alerts:      []amAlertJSON{amTestAlert("resolved", "A", 1), amTestAlert("RESOLVED", "A", 2)},
			common:      map[string]string{"alertname": "A", "job": "node"},
			allResolved: true,
			attrs:       map[string]string{"status": "resolved", "receiver": "oncall", "group_key": `{}:{alertname="Test"}`, "alertname": "A"},
		},
		{
			name:        "one still firing",
			alerts:      []amAlertJSON{amTestAlert("resolved", "A", 1), amTestAlert("firing", "B", 2)},
			allResolved: false,
			attrs:       map[string]string{"status": "firing", "receiver": "oncall", "group_key": `{}:{alertname="Test"}`},
		},
		{
			name:        "all firing",
			alerts:      []amAlertJSON{amTestAlert("firing", "A", 1)},
			allResolved: false,
			attrs:       map[string]string{"status": "firing", "receiver": "oncall", "group_key": `{}:{alertname="Test"}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := amTestPayload(tt.alerts...)
			p.CommonLabels = tt.common
			b := parseAM(t, p)
			if b.AllResolved != tt.allResolved {
				t.Errorf("AllResolved = %v, want %v", b.AllResolved, tt.allResolved)
			}
			if !maps.Equal(b.Attributes, tt.attrs) {
				t.Errorf("Attributes = %v, want %v", b.Attributes, tt.attrs)
			}
		})
	}
}

func TestAlertmanagerExtraFieldsAreIgnored(t *testing.T) {
	t.Parallel()
	// Grafana's webhook adds fields (orgId, values, silenceURL, ...) and
	// versions may differ in type; none of that is decoded.
	body := `{"receiver": "My Super Webhook", "status": "firing", "orgId": 1, "version": 1,
		"alerts": [{"status": "firing", "labels": {"alertname": "High memory usage", "team": "blue"},
			"annotations": {"summary": "zone us-1"}, "startsAt": "2021-10-12T09:51:03.157076+02:00",
			"endsAt": "0001-01-01T00:00:00Z", "fingerprint": "c6eadffa33fcdf37",
			"values": {"B": 44.23943737541908, "C": 1}, "silenceURL": "https://example.com/s"}],
		"groupLabels": {}, "commonLabels": {"team": "blue"}, "commonAnnotations": {}, "externalURL": "https://example.com",
		"groupKey": "{}/{}:{}", "truncatedAlerts": 0, "title": "[FIRING:1]", "message": "..."}`
	b, err := ParseBody([]byte(body), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := "Alertmanager notification [FIRING:1] receiver=\"My Super Webhook\"\n" +
		`- FIRING "High memory usage" team=blue since 2021-10-12T07:51:03Z: zone us-1`
	if b.Text != want {
		t.Fatalf("Text:\n%s\nwant:\n%s", b.Text, want)
	}
}

// severities cycles the severity labels a large group's alerts carry;
// "page" is not a known severity and ranks with none.
var severities = []string{"warning", "critical", "info", "", "error", "page"}

// bigGroup returns n alerts: severities cycling, every third resolved,
// each starting a minute after the previous, with a long summary.
func bigGroup(n int) []amAlertJSON {
	base := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	var alerts []amAlertJSON
	for i := range n {
		status := "firing"
		if i%3 == 2 {
			status = "resolved"
		}
		a := amTestAlert(status, fmt.Sprintf("Alert%04d", i), i)
		a.StartsAt = base.Add(time.Duration(i) * time.Minute).Format(time.RFC3339)
		if sev := severities[i%len(severities)]; sev != "" {
			a.Labels["severity"] = sev
		}
		a.Labels["namespace"] = "payments"
		a.Annotations = map[string]string{"summary": strings.Repeat("the service is degraded and needs a look ", 8)}
		alerts = append(alerts, a)
	}
	return alerts
}

// rank is the keep order the receiver promises, computed independently:
// severity critical > error > warning > info > none (anything else),
// then newest startsAt, then firing before resolved.
func rank(a amAlertJSON) (int, string, int) {
	sev := map[string]int{"critical": 0, "error": 1, "warning": 2, "info": 3}
	r, ok := sev[a.Labels["severity"]]
	if !ok {
		r = 4
	}
	status := 0
	if a.Status == "resolved" {
		status = 1
	}
	return r, a.StartsAt, status
}

func TestParseAlertmanagerKeepsTheMostSevereAndNewest(t *testing.T) {
	t.Parallel()
	alerts := bigGroup(150)
	data, err := json.Marshal(amTestPayload(alerts...))
	if err != nil {
		t.Fatal(err)
	}
	const limit = 16 << 10
	fits := func(b Body) bool { return len(b.Text) <= limit }
	n, err := ParseAlertmanager(data, fits)
	if err != nil {
		t.Fatal(err)
	}
	b := n.Body
	lines := alertLines(b.Text)
	shown := len(lines)
	if n.Alerts != 150 || n.Truncated != 150-shown || shown == 0 || n.Truncated == 0 {
		t.Fatalf("alerts %d, truncated %d, lines %d: want all 150 counted and some, not all, left out", n.Alerts, n.Truncated, shown)
	}
	if len(b.Text) > limit {
		t.Fatalf("text is %d bytes, over the %d that fit", len(b.Text), limit)
	}
	// As many as fit: one more alert would not.
	if more := mustPrepare(t, data).body(shown + 1); fits(more) {
		t.Fatalf("%d alerts shown, but %d fit", shown, shown+1)
	}
	if b.Attributes[AttrTruncated] != strconv.Itoa(n.Truncated) {
		t.Fatalf("truncated attribute %q, want %d", b.Attributes[AttrTruncated], n.Truncated)
	}
	if !strings.HasPrefix(b.Text, "Alertmanager notification [FIRING:100, RESOLVED:50]") {
		t.Fatalf("header does not count every alert: %q", strings.SplitN(b.Text, "\n", 2)[0])
	}

	// The alerts kept are the first of the promised order; the rest are
	// counted by severity and status in the closing line.
	order := slices.Clone(alerts)
	slices.SortStableFunc(order, func(x, y amAlertJSON) int {
		xr, xs, xst := rank(x)
		yr, ys, yst := rank(y)
		return cmp.Or(cmp.Compare(xr, yr), -cmp.Compare(xs, ys), cmp.Compare(xst, yst))
	})
	kept := map[string]bool{}
	for _, a := range order[:shown] {
		kept[a.Labels["alertname"]] = true
	}
	for _, l := range lines {
		name := strings.Fields(l)[2]
		if !kept[name] {
			t.Errorf("%s shown, but it is not among the %d most severe and newest", name, shown)
		}
	}
	for _, a := range alerts {
		if a.Labels["severity"] == "critical" && !kept[a.Labels["alertname"]] {
			t.Errorf("critical %s left out while less severe alerts are shown", a.Labels["alertname"])
		}
	}
	bySev := map[string]int{}
	status := map[string]int{}
	for _, a := range order[shown:] {
		r, _, _ := rank(a)
		bySev[[]string{"critical", "error", "warning", "info", "none"}[r]]++
		status[a.Status]++
	}
	var sevs, sts []string
	for _, s := range []string{"critical", "error", "warning", "info", "none"} {
		if bySev[s] > 0 {
			sevs = append(sevs, fmt.Sprintf("%s %d", s, bySev[s]))
		}
	}
	for _, s := range []string{"firing", "resolved"} {
		if status[s] > 0 {
			sts = append(sts, fmt.Sprintf("%s %d", s, status[s]))
		}
	}
	want := fmt.Sprintf("\n(%d more alerts not shown: %s; %s)", n.Truncated, strings.Join(sevs, ", "), strings.Join(sts, ", "))
	if !strings.HasSuffix(b.Text, want) {
		t.Fatalf("text ends\n%q\nwant\n%q", b.Text[len(b.Text)-120:], want)
	}
	// Firing lines come before resolved ones.
	if i, j := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "- RESOLVED") }),
		slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "- FIRING") }); i >= 0 && j > i {
		t.Fatal("a resolved alert is listed before a firing one")
	}
	// One notification, one id, however much of it is shown.
	if all, err := ParseBody(data, 0); err != nil || all.ID != b.ID {
		t.Fatalf("ParseBody id %q (%v), ParseAlertmanager id %q", all.ID, err, b.ID)
	}
}

func mustPrepare(t *testing.T, data []byte) *amRendering {
	t.Helper()
	p, rej := decodeAlertmanager(data, 0)
	if rej != nil {
		t.Fatal(rej)
	}
	return p.prepare()
}

func TestParseAlertmanagerShowsEverythingThatFits(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/alertmanager_firing.json")
	if err != nil {
		t.Fatal(err)
	}
	n, err := ParseAlertmanager(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseBody(data, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n.Body.Text != b.Text || n.Body.ID != b.ID || !maps.Equal(n.Body.Attributes, b.Attributes) || n.Truncated != 0 || n.Alerts != 3 {
		t.Fatalf("ParseAlertmanager %+v\ndiffers from ParseBody %+v", n, b)
	}
	if n.GroupKey != `{}/{team="payments"}:{cluster="payments"}` {
		t.Fatalf("group key %q", n.GroupKey)
	}
}

func TestParseAlertmanagerRejects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body   string
		fits   func(Body) bool
		reason string
	}{
		{`{"text": "an envelope"}`, nil, RejectInvalidJSON},
		{`[{"status": "firing"}]`, nil, RejectInvalidJSON},
		{`{"status": "firing", "alerts": 3}`, nil, RejectInvalidJSON},
		{`{"status": "firing", "alerts": [}`, nil, RejectInvalidJSON},
		{`{"status": "firing", "alerts": []}`, nil, RejectNoText},
		{" \n", nil, RejectEmpty},
		{"{\"status\": \"firing\", \"alerts\": [\xff]}", nil, RejectInvalidUTF8},
		// Nothing fits, not even the header.
		{`{"status": "firing", "alerts": [{"status": "firing", "labels": {"alertname": "X"}}]}`, func(Body) bool { return false }, RejectTooLarge},
	} {
		_, err := ParseAlertmanager([]byte(c.body), c.fits)
		var rej *RejectError
		if !errors.As(err, &rej) || rej.Reason != c.reason {
			t.Errorf("%q: error %v, want reason %s", c.body, err, c.reason)
		}
	}
}
