package docscheck

import (
	"fmt"
	"html"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// flat is text with each run of white space one space: a sentence the
// same however its lines are wrapped.
func flat(text string) string { return strings.Join(strings.Fields(text), " ") }

// guideBlock is the text of docs/getting-started.md's fenced block that
// contains marker.
func guideBlock(t *testing.T, marker string) string {
	t.Helper()
	for _, part := range strings.Split(read(t, "docs/getting-started.md"), "\n```")[1:] {
		if _, body, ok := strings.Cut(part, "\n"); ok && strings.Contains(body, marker) {
			return body
		}
	}
	t.Fatalf("docs/getting-started.md has no block with %q", marker)
	return ""
}

// The guide names every check preflight makes (the check names in
// lambdas/provision's source), and says it does not check the invoker
// role, which provision has no way to assume.
func TestTheGuideNamesEveryPreflightCheck(t *testing.T) {
	names := map[string]bool{}
	for _, f := range []string{"lambdas/provision/preflight.go", "lambdas/provision/groupaccess.go", "lambdas/provision/quota.go"} {
		for _, m := range regexp.MustCompile(`Check\{Check: "([a-z-]+)"`).FindAllStringSubmatch(read(t, f), -1) {
			names[m[1]] = true
		}
	}
	if len(names) < 6 {
		t.Fatalf("read the checks %v from lambdas/provision: has the source's layout changed?", names)
	}
	guide := read(t, "docs/getting-started.md")
	_, para, ok := strings.Cut(guide, "**What preflight checks, by name**")
	para, _, _ = strings.Cut(para, "\n\n")
	if !ok {
		t.Fatal("docs/getting-started.md has no paragraph **What preflight checks, by name**")
	}
	var missing []string
	for n := range names {
		if !strings.Contains(para, "`"+n+"`") {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the guide's preflight paragraph does not name the checks %v", missing)
	}
	if !strings.Contains(para, "does **not** check the invoker role") {
		t.Error("the guide's preflight paragraph must say preflight does not check the invoker role")
	}
}

// The idle caveat, in README and the guide, is the code's: the default
// minimum running time, scale-down's default
// schedule, and examples/complete's pools (linux-large without a window,
// linux's pre_runner_script installing build-essential).
func TestTheIdleCaveatIsTheCodesDefaults(t *testing.T) {
	minRun := state.DefaultTimings().MinRunningTime
	vars, _ := variables(t)
	caveat := fmt.Sprintf("scale-down (%s by default, `scale_down_schedule`) terminates each idle instance older than the pool's\nminimum running time (%d minutes by default)",
		spoken(vars["scale_down_schedule"]), minRun/60)
	if !strings.Contains(flat(read(t, "README.md")), flat(caveat)) {
		t.Errorf("README.md's \"waits warm\" lacks its caveat as the code has it:\n%s", caveat)
	}
	guide := flat(read(t, "docs/getting-started.md"))
	want := fmt.Sprintf("(`scale_down_schedule`, %s by default) terminates each idle instance older than the\npool's minimum running time (%d minutes by default)",
		spoken(vars["scale_down_schedule"]), minRun/60)
	if !strings.Contains(guide, flat(want)) {
		t.Errorf("the guide's **How warm the pools are** does not say:\n%s", want)
	}

	example := read(t, "examples/complete/main.tf")
	_, large, ok := strings.Cut(example, "    linux-large = {\n")
	large, _, _ = strings.Cut(large, "\n    }\n")
	_, small, _ := strings.Cut(example, "    linux = {\n")
	small, _, _ = strings.Cut(small, "\n    linux-large = {")
	if !ok || strings.Contains(large, "idle_windows") || !strings.Contains(guide, "`linux-large` has **no window**") {
		t.Errorf("the guide says linux-large has no idle window; examples/complete's linux-large:\n%s", large)
	}
	if !strings.Contains(small, "idle_windows") || !strings.Contains(small, `idle_count = 3`) || !strings.Contains(guide, "`linux` keeps three from") {
		t.Errorf("the guide says linux keeps three in its window; examples/complete's linux:\n%s", small)
	}
	if !regexp.MustCompile(`pre_runner_script = <<-EOT[\s\S]*apt-get install -qy build-essential`).MatchString(small) ||
		!strings.Contains(guide, "`linux`'s `pre_runner_script` installs `build-essential`") {
		t.Errorf("the guide says linux's pre_runner_script installs build-essential; examples/complete's linux:\n%s", small)
	}
}

// The guide's App form names the App after the organization, within
// GitHub's 34 characters: a name is unique on all of GitHub, and the
// manifest's own ("ghrunner") can be taken once. The block's Python runs
// here as the guide has it.
func TestTheGuidesAppFormNamesTheAppAfterTheOrganization(t *testing.T) {
	if name := regexp.MustCompile(`"name": "([^"]+)"`).FindStringSubmatch(read(t, "docs/github-app-manifest.json")); name == nil || name[1] != "ghrunner" {
		t.Errorf("docs/github-app-manifest.json's name %v: the guide says `ghrunner`", name)
	}
	block := guideBlock(t, "create-ghrunner-app.html")
	_, script, ok := strings.Cut(block+"\n", "<<'PY'\n")
	script, _, _ = strings.Cut(script, "\nPY\n")
	if !ok {
		t.Fatalf("the App form block has no Python heredoc:\n%s", block)
	}
	manifest, err := filepath.Abs(repo + "docs/github-app-manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	for org, want := range map[string]string{"acme": "ghrunner-acme", strings.Repeat("o", 39): "ghrunner-" + strings.Repeat("o", 25)} {
		cmd := exec.Command("python3", "-", org, manifest)
		cmd.Stdin = strings.NewReader(script + "\n")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("the App form's Python: %v\n%s", err, err.(*exec.ExitError).Stderr)
		}
		m := regexp.MustCompile(`name="manifest" value="([^"]*)"`).FindStringSubmatch(string(out))
		if m == nil || !strings.Contains(html.UnescapeString(m[1]), `"name": "`+want+`"`) {
			t.Errorf("org %s: the form's manifest does not name the App %s:\n%s", org, want, out)
		}
	}
}

// The guide never exports TF_CLI_CONFIG_FILE (it replaces the user's own
// CLI configuration): each terraform command that needs the development
// build sets it on itself, and make install's hint says so too.
func TestTheGuideScopesTheCLIConfigurationToTheDeployment(t *testing.T) {
	guide := read(t, "docs/getting-started.md")
	if strings.Contains(guide, "export TF_CLI_CONFIG_FILE") {
		t.Error("docs/getting-started.md exports TF_CLI_CONFIG_FILE: it would replace the user's CLI configuration in the whole shell")
	}
	commands := 0
	for _, part := range strings.Split(guide, "\n```sh\n")[1:] {
		block, _, _ := strings.Cut(part, "\n```")
		for _, line := range strings.Split(block, "\n") {
			if !regexp.MustCompile(`(^|\$\()terraform (init|apply|plan|-chdir)`).MatchString(line) && !strings.Contains(line, " terraform ") {
				continue
			}
			commands++
			if !strings.Contains(line, "TF_CLI_CONFIG_FILE=<ghrunner>/.terraform-mirror/dev.terraformrc terraform ") {
				t.Errorf("a terraform command of the guide without the deployment's CLI configuration on it: %s", line)
			}
		}
	}
	if commands < 4 {
		t.Errorf("found %d terraform commands in the guide's blocks: has its layout changed?", commands)
	}
	mk := read(t, "GNUmakefile")
	if strings.Contains(mk, "export TF_CLI_CONFIG_FILE=$(MIRROR)/dev.terraformrc") || !strings.Contains(mk, "TF_CLI_CONFIG_FILE=$(MIRROR)/dev.terraformrc terraform plan") {
		t.Error("make install's hint must set TF_CLI_CONFIG_FILE on a command, not export it")
	}
}

// The build time the guide warns of covers the one README measured for
// make install with Go's build cache empty.
func TestTheGuidesBuildTimeCoversTheMeasuredOne(t *testing.T) {
	row := regexp.MustCompile("(?m)^\\| `make install`, Go's build cache empty[^|]*\\| \\*\\*(\\d+) min (\\d+) s\\*\\*").FindStringSubmatch(read(t, "README.md"))
	if row == nil {
		t.Fatal("README's Measured table has no row for make install with an empty build cache")
	}
	var minutes, seconds int
	fmt.Sscan(row[1], &minutes)
	fmt.Sscan(row[2], &seconds)
	stated := regexp.MustCompile(`\*\*building takes up to about (\d+) minutes\*\*`).FindStringSubmatch(flat(read(t, "docs/getting-started.md")))
	if stated == nil {
		t.Fatal("the guide does not say how long the build takes (**building takes up to about N minutes**)")
	}
	var warned int
	fmt.Sscan(stated[1], &warned)
	if warned*60 < minutes*60+seconds {
		t.Errorf("the guide says the build takes up to about %d minutes; README measured %d min %d s", warned, minutes, seconds)
	}
	if !strings.Contains(flat(read(t, "docs/getting-started.md")), fmt.Sprintf("measured %d min %d s", minutes, seconds)) {
		t.Errorf("the guide does not state README's measurement (%d min %d s)", minutes, seconds)
	}
}
