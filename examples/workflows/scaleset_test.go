package workflows_test

import (
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestTheScaleSetWorkflowNeedsNoInvokingJobNorToken: every job runs on the
// scale set by its name alone, no job invokes ghrunner (no action, no
// id-token), and the name is a scale set name the provider accepts.
func TestTheScaleSetWorkflowNeedsNoInvokingJobNorToken(t *testing.T) {
	raw, err := os.ReadFile("scale-set.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf workflow
	if err := yaml.Unmarshal(raw, &wf); err != nil {
		t.Fatalf("scale-set.yml: %v", err)
	}
	if len(wf.Permissions) != 1 || wf.Permissions["contents"] != "read" {
		t.Errorf("permissions %v, want contents: read alone", wf.Permissions)
	}
	if len(wf.Jobs) == 0 {
		t.Fatal("no job")
	}
	for name, job := range wf.Jobs {
		if job.RunsOn != "linux-scale" {
			t.Errorf("job %s runs on %q, want the scale set's name linux-scale", name, job.RunsOn)
		}
		if len(job.Permissions) != 0 {
			t.Errorf("job %s asks for permissions %v", name, job.Permissions)
		}
		for _, s := range job.Steps {
			if strings.Contains(s.Uses, "ghrunner") {
				t.Errorf("job %s invokes ghrunner (%s): a scale set needs no invoking job", name, s.Uses)
			}
		}
	}
}
