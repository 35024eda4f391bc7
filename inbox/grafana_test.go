package inbox

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// A Grafana notification renders as compactly as Alertmanager's: one
// header, one line per alert, most severe first, with the values of the
// rule's queries; the links, title and message Grafana adds are left out.
func TestGrafanaRendering(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/grafana_firing.json")
	if err != nil {
		t.Fatal(err)
	}
	n, err := ParseGrafana(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `Grafana alert notification [FIRING:2] receiver=oncall-webhook group={alertname="HighMemory"} common={grafana_folder="Payments", team="blue"}
- FIRING HighMemory severity=critical zone=eu-1 since 2026-11-29T07:55:00Z values="[ var='B' labels={instance=db-1} value=97.5 ]": Memory above 97% in zone eu-1
- FIRING HighMemory severity=warning zone=us-1 since 2026-11-29T06:51:03Z values={B=94.23943737541908, C=1}: Memory above 90% in zone us-1`
	if n.Body.Text != want {
		t.Fatalf("text\n%s\nwant\n%s", n.Body.Text, want)
	}
	if n.Body.From != "grafana" || n.Body.Format != FormatGrafana || n.Alerts != 2 || n.Truncated != 0 || n.Body.AllResolved {
		t.Fatalf("body %+v, notification %+v", n.Body, n)
	}
	if n.Body.Attributes["status"] != "firing" || n.Body.Attributes["alertname"] != "HighMemory" {
		t.Fatalf("attributes %v", n.Body.Attributes)
	}
	// The id is the Alertmanager receiver's: a retry shares it.
	again, _ := ParseGrafana(data, nil)
	if again.Body.ID != n.Body.ID || !strings.HasPrefix(n.Body.ID, "alertmanager:") {
		t.Fatalf("ids %q, %q", n.Body.ID, again.Body.ID)
	}
	for _, leak := range []string{"silence", "viewPanel", "**Firing**", "runbooks.example"} {
		if strings.Contains(n.Body.Text, leak) {
			t.Errorf("the rendering shows %q", leak)
		}
	}

	// Cut to fit: the critical alert is kept, the warning counted.
	cut, err := ParseGrafana(data, func(b Body) bool { return len(b.Text) < len(want)-50 })
	if err != nil {
		t.Fatal(err)
	}
	if cut.Truncated != 1 || !strings.Contains(cut.Body.Text, "severity=critical") || !strings.Contains(cut.Body.Text, "(1 more alert not shown: warning 1; firing 1)") {
		t.Fatalf("cut: %d\n%s", cut.Truncated, cut.Body.Text)
	}
}

// A body that is not a Grafana notification is refused with a reason.
func TestGrafanaRejects(t *testing.T) {
	t.Parallel()
	for body, reason := range map[string]string{
		`{"text": "hello"}`:                  RejectInvalidJSON,
		`[1, 2]`:                             RejectInvalidJSON,
		`{"status": "firing", "alerts": []}`: RejectNoText,
		"   ":                                RejectEmpty,
	} {
		_, err := ParseGrafana([]byte(body), nil)
		if rej, ok := errors.AsType[*RejectError](err); !ok || rej.Reason != reason {
			t.Errorf("%s: %v, want %s", body, err, reason)
		} else if reason == RejectInvalidJSON && !strings.Contains(rej.Detail, "Grafana") {
			t.Errorf("%s: detail %q does not name Grafana", body, rej.Detail)
		}
	}
}
