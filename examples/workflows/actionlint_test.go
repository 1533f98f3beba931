package workflows_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// actionlint is scripts/ensure-actionlint's: the pinned version, built from
// the Go module proxy into a cache folder the first time.
func actionlint(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Fatal("shellcheck not found (actionlint checks the run: scripts with it): run make tools")
	}
	out, err := exec.Command("../../scripts/ensure-actionlint").Output()
	if err != nil {
		t.Fatalf("scripts/ensure-actionlint: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// The example workflows, with the action ci.yml references checked as a
// local action (its with: against action.yml's inputs), and the release
// workflow, pass actionlint and the shellcheck it runs on their scripts.
// actionlint checks a local action only inside a project (a folder with
// .git and .github/workflows), so the test makes one: ci.yml as a user's
// repository holds it, ../../action as ./action.
func TestTheWorkflowsAndTheActionPassActionlint(t *testing.T) {
	bin := actionlint(t)
	project := t.TempDir()
	for _, dir := range []string{".git", ".github/workflows", "action"} {
		if err := os.MkdirAll(filepath.Join(project, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ci, err := os.ReadFile("ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	wf := readWorkflow(t)
	ref := invoking(t, wf, "provision").Uses
	local := strings.ReplaceAll(string(ci), ref, "./action")
	if err := os.WriteFile(filepath.Join(project, ".github/workflows/ci.yml"), []byte(local), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"action.yml", "invoke.sh"} {
		raw, err := os.ReadFile(filepath.Join("../../action", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(project, "action", f), raw, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	release, err := filepath.Abs("../../.github/workflows/release.yml")
	if err != nil {
		t.Fatal(err)
	}
	// A scale set's name is a label actionlint cannot know: a user's
	// repository says it in actionlint's configuration, as this does.
	if err := os.WriteFile(filepath.Join(project, ".github/actionlint.yaml"), []byte("self-hosted-runner:\n  labels: [linux-scale]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	scaleSet, err := os.ReadFile("scale-set.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, ".github/workflows/scale-set.yml"), scaleSet, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-no-color", ".github/workflows/ci.yml", ".github/workflows/scale-set.yml", release)
	cmd.Dir = project
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("actionlint: %v\n%s", err, out)
	}

	// It would say so: an input the action does not have.
	broken := strings.Replace(local, "role-to-assume:", "role-to-asume:", 1)
	os.WriteFile(filepath.Join(project, ".github/workflows/ci.yml"), []byte(broken), 0o644)
	cmd = exec.Command(bin, "-no-color", ".github/workflows/ci.yml")
	cmd.Dir = project
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), `input "role-to-asume" is not defined in action`) {
		t.Errorf("actionlint passed a workflow giving the action an input it lacks: %v\n%s", err, out)
	}
}
