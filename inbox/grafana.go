package inbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// FormatGrafana is Body.Format of a Grafana alerting notification
// (ParseGrafana).
const FormatGrafana = "grafana"

// grafanaAlerts is what Grafana's unified alerting webhook adds to each
// alert of the Alertmanager payload it extends, as far as the rendering
// shows it: the values of the rule's queries and expressions. The other
// extras (orgId, title, state, message, and per alert dashboardURL,
// panelURL, silenceURL, imageURL) repeat what the rendering says or are
// links; a webhook's text template can show them.
type grafanaAlerts struct {
	Alerts []struct {
		Values      map[string]json.RawMessage `json:"values"`
		ValueString string                     `json:"valueString"`
	} `json:"alerts"`
}

// grafanaMaxValues bounds the values one alert line shows; grafanaMaxValue
// bounds valueString, in runes.
const (
	grafanaMaxValues = 8
	grafanaMaxValue  = 200
)

// ParseGrafana reads a Grafana unified alerting webhook notification
// (Grafana's "webhook" contact point; version "1") and renders it as
// ParseAlertmanager renders Alertmanager's, whose payload Grafana's
// extends: the header says "Grafana alert notification", and each alert's
// line adds its values (values={A=95.2, C=1}, or Grafana's valueString
// when there are none). The id, the order in which alerts are kept when
// not all fit, the attributes and AllResolved follow ParseAlertmanager;
// Body.From is "grafana" and Body.Format FormatGrafana. Errors are
// *RejectError, as ParseAlertmanager's: anything but a JSON object with
// an "alerts" array and a "status" string is RejectInvalidJSON.
func ParseGrafana(data []byte, fits func(Body) bool) (AlertmanagerNotification, error) {
	p, trimmed, rej := readAlertmanager(data, "a Grafana alerting webhook payload", "(Grafana's webhook contact point)")
	if rej != nil {
		return AlertmanagerNotification{}, rej
	}
	var extra grafanaAlerts
	if err := json.Unmarshal(trimmed, &extra); err != nil {
		return AlertmanagerNotification{}, jsonReject("grafana payload", err, -1)
	}
	p.heading = "Grafana alert notification"
	for i, a := range extra.Alerts {
		if i < len(p.Alerts) {
			p.Alerts[i].values = grafanaValues(a.Values, a.ValueString)
		}
	}
	n, err := p.fit(fits)
	if err != nil {
		return AlertmanagerNotification{}, err
	}
	n.Body.From, n.Body.Format = "grafana", FormatGrafana
	return n, nil
}

// grafanaValues renders an alert's values as {A=95.2, C=1} (sorted by
// name, at most grafanaMaxValues of them, each bounded like a label), or
// else its valueString bounded and quoted; "" when it has neither.
func grafanaValues(values map[string]json.RawMessage, valueString string) string {
	if len(values) == 0 {
		if vs := singleLine(valueString); vs != "" {
			return amValue(truncateRunes(vs, grafanaMaxValue))
		}
		return ""
	}
	shown := make(map[string]string, len(values))
	for k, raw := range values {
		var compact bytes.Buffer
		if json.Compact(&compact, raw) != nil {
			compact.Reset()
			compact.Write(bytes.TrimSpace(raw))
		}
		shown[k] = strings.Trim(compact.String(), `"`)
	}
	var out []string
	for k, v := range sorted(shown) {
		if len(out) == grafanaMaxValues {
			out = append(out, fmt.Sprintf("+%d values", len(values)-grafanaMaxValues))
			break
		}
		out = append(out, amName(k)+"="+amValue(v))
	}
	return "{" + strings.Join(out, ", ") + "}"
}
