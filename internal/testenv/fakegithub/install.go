package fakegithub

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/testbin"
)

// AllowRoot is what a runner running as root needs in its environment:
// the real config.sh and run.sh refuse root without it, and so does the
// fake. Tests that run the runner as their own user (root) set it.
const AllowRoot = "RUNNER_ALLOW_RUNASROOT=1"

// BuildRunner compiles the fake runner once per process and returns its path.
func BuildRunner() (string, error) {
	return testbin.Build(testbin.Module + "/internal/testenv/fakegithub/fakerunner")
}

// InstallRunner lays out a runner directory as the runner tarball would,
// with config.sh and run.sh as thin wrappers around the fake runner binary.
// Like the real config.sh, both change to the runner directory first, so
// .runner and .credentials land there whatever the caller's directory.
func InstallRunner(dir, binary string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	quoted := "'" + strings.ReplaceAll(binary, "'", `'\''`) + "'"
	wrapper := func(command string) string {
		return "#!/bin/bash\n" +
			"# " + map[string]string{"config": "config.sh", "run": "run.sh"}[command] + " of the fake GitHub Actions runner (ghrunner tests).\n" +
			"DIR=\"$(cd -P \"$(dirname \"${BASH_SOURCE[0]}\")\" && pwd)\"\n" +
			"cd \"$DIR\" || exit 1\n" +
			"exec " + quoted + " " + command + " \"$@\"\n"
	}
	for name, command := range map[string]string{"config.sh": "config", "run.sh": "run"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(wrapper(command)), 0o755); err != nil {
			return err
		}
	}
	// bin/Runner.Listener, which the agent asks for its version.
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "bin", "Runner.Listener"), []byte("#!/bin/bash\nexec "+quoted+" \"$@\"\n"), 0o755)
}

// NewRunnerDir builds the fake runner (once per process) and installs it in
// a fresh temporary directory, which it returns.
func NewRunnerDir(t testing.TB) string {
	t.Helper()
	bin, err := BuildRunner()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "runner")
	if err := InstallRunner(dir, bin); err != nil {
		t.Fatal(err)
	}
	return dir
}
