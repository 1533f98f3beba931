package docscheck

import (
	"regexp"
	"strings"
	"testing"
)

// The module's functions have no on-failure destination (main.tf says
// why: a GitHub outage would mail every failed refresh); issue 40 item 5.
var onFailureSet = regexp.MustCompile(`(?m)^\s*on_failure_topic_arn\s*=`)

// Issue 40 item 5: the README and the module's monitoring description
// once said a failed refresh or scale-down run is sent to the alarm
// topic. The module sets no on-failure destination, and both say so.
func TestTheDocsSayFailedScheduledRunsAreNotSentToTheAlarmTopic(t *testing.T) {
	if onFailureSet.MatchString(read(t, "modules/runner-pool/main.tf")) {
		t.Fatal("modules/runner-pool/main.tf now sets on_failure_topic_arn: say where failed scheduled runs go in README.md and the monitoring variable's description, and change this test")
	}
	for _, name := range []string{"README.md", "modules/runner-pool/variables.tf"} {
		text := strings.Join(strings.Fields(read(t, name)), " ")
		if !strings.Contains(text, "refresh or scale-down run is not sent to the topic") {
			t.Errorf("%s does not say that a failed refresh or scale-down run is not sent to the topic", name)
		}
		if strings.Contains(text, "on-failure destination") {
			t.Errorf("%s names an on-failure destination, which the module does not set", name)
		}
	}
}

// Issue 40 item 4: a deployment made inside the clone (against the guide's
// advice) cannot be committed by mistake.
func TestGitignoreLeavesOutTerraformStateVariablesAndWorkingFiles(t *testing.T) {
	lines := map[string]bool{}
	for _, l := range strings.Split(read(t, ".gitignore"), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, want := range []string{".terraform/", "*.tfstate", "*.tfstate.*", "*.tfvars", "*.tfvars.json"} {
		if !lines[want] {
			t.Errorf(".gitignore has no line %q", want)
		}
	}
}
