package workflows_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
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

// guideBlocks are the shell blocks of docs/getting-started.md marked
// <!-- run --> that write into the user's .github folder: copying ci.yml
// and vendoring the action as a local one (a user's repository before
// ghrunner's first release), with <ghrunner> this checkout.
func guideBlocks(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/getting-started.md")
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	lines := strings.Split(string(raw), "\n")
	for i := 0; i+1 < len(lines); i++ {
		if lines[i] != "<!-- run -->" || lines[i+1] != "```sh" {
			continue
		}
		var block strings.Builder
		for j := i + 2; j < len(lines) && lines[j] != "```"; j++ {
			block.WriteString(lines[j] + "\n")
		}
		if strings.Contains(block.String(), ".github/") {
			script.WriteString(block.String())
		}
	}
	if !strings.Contains(script.String(), ".github/actions/ghrunner") {
		t.Fatalf("docs/getting-started.md has no <!-- run --> block vendoring the action into .github/actions/ghrunner:\n%s", script.String())
	}
	return strings.ReplaceAll(script.String(), "<ghrunner>", root)
}

// The example workflows and the release workflow pass actionlint and the
// shellcheck it runs on their scripts, with ci.yml as the guide has a user
// vendor the action before ghrunner's first release: the guide's own
// blocks copy ci.yml and the action's files into a user's repository (a
// folder with .git, where actionlint checks a local action's with:
// against its action.yml) and rewrite the invoking steps to the local
// action, each after a checkout of it.
func TestTheWorkflowsAndTheActionPassActionlint(t *testing.T) {
	bin := actionlint(t)
	project := t.TempDir()
	if err := os.MkdirAll(filepath.Join(project, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	guide := exec.Command("bash", "-euo", "pipefail", "-c", guideBlocks(t))
	guide.Dir = project
	if out, err := guide.CombinedOutput(); err != nil {
		t.Fatalf("the guide's blocks: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(project, ".github/workflows/ci.yml"))
	if err != nil {
		t.Fatal(err)
	}
	local := string(raw)
	ref := invoking(t, readWorkflow(t), "provision").Uses
	var wf workflow
	if err := yaml.Unmarshal(raw, &wf); err != nil {
		t.Fatalf("the vendored ci.yml: %v", err)
	}
	for _, job := range []string{"provision", "release"} {
		j := wf.Jobs[job]
		steps := j.Steps
		if strings.Contains(local, ref) || len(steps) != 2 || steps[0].Uses != "actions/checkout@v4" ||
			steps[0].With["sparse-checkout"] != ".github/actions/ghrunner" || steps[1].Uses != "./.github/actions/ghrunner" {
			t.Errorf("the vendored ci.yml's job %s: steps %+v, want a checkout of .github/actions/ghrunner and then uses: ./.github/actions/ghrunner", job, steps)
		}
		if j.Permissions["contents"] != "read" || j.Permissions["id-token"] != "write" {
			t.Errorf("the vendored ci.yml's job %s: permissions %v, want contents: read (the checkout) and id-token: write", job, j.Permissions)
		}
	}
	for _, f := range []string{"action.yml", "invoke.sh", "invoke.py"} {
		if st, err := os.Stat(filepath.Join(project, ".github/actions/ghrunner", f)); err != nil || (f == "invoke.sh" && st.Mode()&0o100 == 0) {
			t.Errorf("the vendored action's %s: %v (invoke.sh must stay executable)", f, err)
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
