package alerting

import (
	"os"
	"strings"
	"testing"
)

// alertmanagerDoc documents the receiver; it shows receiverConfig whole.
const alertmanagerDoc = "../../docs/alertmanager.md"

// The receiver configuration the end-to-end test runs is what the
// document shows, and it is valid as shown (amtool check-config). The
// alert rules on the receiver's metrics are the chart's
// (deploy/helm/agent-worker/files/rules.yaml), tested in deploy/helm.
func TestDocShowsTheTestedFiles(t *testing.T) {
	t.Parallel()
	bins := lookBinaries(t)
	doc, err := os.ReadFile(alertmanagerDoc)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(receiverConfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```yaml\n"+string(data)+"```\n") {
		t.Errorf("%s does not show %s as it is (in a yaml code block): copy the file into the document again", alertmanagerDoc, receiverConfig)
	}
	checkConfig(t, bins["amtool"], receiverConfig)
}
