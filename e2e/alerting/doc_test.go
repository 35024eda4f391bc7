package alerting

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// alertmanagerDoc documents the receiver; it shows receiverConfig and
// receiverRules whole.
const alertmanagerDoc = "../../docs/alertmanager.md"

// receiverRules are the alert rules on the receiver's metrics that the
// document proposes.
const receiverRules = "testdata/receiver-rules.yaml"

// The receiver configuration the end-to-end test runs, and the rules the
// document proposes, are what the document shows, and they are valid as
// shown (amtool check-config, promtool check rules).
func TestDocShowsTheTestedFiles(t *testing.T) {
	t.Parallel()
	bins := lookBinaries(t)
	doc, err := os.ReadFile(alertmanagerDoc)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{receiverConfig, receiverRules} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), "```yaml\n"+string(data)+"```\n") {
			t.Errorf("%s does not show %s as it is (in a yaml code block): copy the file into the document again", alertmanagerDoc, f)
		}
	}
	checkConfig(t, bins["amtool"], receiverConfig)
	var out bytes.Buffer
	cmd := exec.Command(bins["promtool"], "check", "rules", receiverRules)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("promtool check rules %s: %v\n%s", receiverRules, err, out.String())
	}
}
