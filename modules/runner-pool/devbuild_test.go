package runnerpool_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// guideDeploymentBlock is the shell block of docs/getting-started.md that
// makes the deployment's directory (step 4): the one that copies
// examples/complete.
func guideDeploymentBlock(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/getting-started.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(raw), "```sh\n")[1:] {
		block, _, _ = strings.Cut(block, "\n```")
		if strings.Contains(block, "cp <ghrunner>/examples/complete/") {
			return block + "\n"
		}
	}
	t.Fatal("docs/getting-started.md has no shell block that copies examples/complete")
	return ""
}

// makeInstall runs make install into mirror with the make variables given.
func makeInstall(t *testing.T, mirror string, vars ...string) {
	t.Helper()
	out, err := exec.Command("make", append([]string{"-C", "../..", "install", "MIRROR=" + mirror}, vars...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("make install %v: %v\n%s", vars, err, out)
	}
}

// tfResult runs terraform in dir with cliConfig and returns its output and
// error, for a command that may fail.
func tfResult(dir, cliConfig string, args ...string) (string, error) {
	cmd := exec.Command("terraform", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing", "TF_PLUGIN_CACHE_DIR=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Issue 40 item 3: make install labels every build with the same version,
// so a rebuild used to break a deployment directory (plan: "Required
// plugins are not installed"; init: the checksum). The guide's directory,
// made by the guide's own block outside the clone and used with
// dev.terraformrc, plans after a rebuild that made a different binary, and
// init and init -upgrade pass there too. The same directory with the
// mirror's terraformrc (what the tests use) fails after that rebuild: the
// rebuild was real and the hazard is still there for that config.
func TestTheGuidesDeploymentDirectoryPlansAfterARebuild(t *testing.T) {
	repoRoot, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	mirror := t.TempDir() // its own: the rebuild must not touch the mirror other tests run
	makeInstall(t, mirror)
	devConfig, testConfig := filepath.Join(mirror, "dev.terraformrc"), filepath.Join(mirror, "terraformrc")

	home := t.TempDir()
	script := strings.ReplaceAll(guideDeploymentBlock(t), "<ghrunner>", repoRoot)
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = home, append(os.Environ(), "HOME="+home)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the guide's block that makes the deployment's directory: %v\n%s\n%s", err, script, out)
	}
	dir := filepath.Join(home, "ghrunner-ci")
	if _, err := os.Stat(filepath.Join(dir, "terraform.tfvars")); err != nil {
		t.Fatalf("the guide's block made no %s/terraform.tfvars: %v", dir, err)
	}
	// The same files, used the way the tests use the mirror.
	control := t.TempDir()
	for _, f := range []string{"main.tf", "variables.tf", "terraform.tfvars"} {
		raw, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(control, f), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	steps := func(when string, args ...string) {
		t.Helper()
		out, err := tfResult(dir, devConfig, args...)
		if err != nil {
			t.Fatalf("%s: terraform %s in the guide's directory: %v\n%s", when, strings.Join(args, " "), err, lastLines(out, 30))
		}
		if !strings.Contains(out, "Provider development overrides are in effect") {
			t.Errorf("%s: terraform %s did not warn that the development build is in use\n%s", when, strings.Join(args, " "), lastLines(out, 30))
		}
	}
	steps("before the rebuild", "init", "-input=false", "-no-color")
	steps("before the rebuild", "plan", "-input=false", "-no-color", "-lock=false")
	if out, err := tfResult(control, testConfig, "init", "-input=false", "-no-color"); err != nil {
		t.Fatalf("init with the mirror's terraformrc: %v\n%s", err, lastLines(out, 20))
	}

	built := filepath.Join(mirror, "dev", "bin", "terraform-provider-ghrunner")
	before, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	// A rebuild that makes a different binary under the same version, as
	// one from a tree with other changes does.
	makeInstall(t, mirror, "DEV_VERSION=0.1.0-dev+rebuilt")
	after, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(before, after) {
		t.Fatal("the second make install built the same binary: the test would prove nothing")
	}

	steps("after the rebuild", "plan", "-input=false", "-no-color", "-lock=false")
	steps("after the rebuild", "init", "-input=false", "-no-color")
	steps("after the rebuild", "init", "-upgrade", "-input=false", "-no-color")
	steps("after init -upgrade", "plan", "-input=false", "-no-color", "-lock=false")

	if out, err := tfResult(control, testConfig, "plan", "-input=false", "-no-color", "-lock=false"); err == nil {
		t.Errorf("with the mirror's terraformrc, plan after the rebuild passed; the rebuild did not change what terraform installed\n%s", lastLines(out, 20))
	} else {
		t.Logf("as expected, with the mirror's terraformrc plan after the rebuild fails: %s", lastLines(out, 6))
	}
}
