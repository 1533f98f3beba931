//go:build releasecheck

package releasecheck

import (
	"os/exec"
	"strings"
	"testing"
)

// goreleaser is `go run` of the version scripts/goreleaser-version names,
// the one the release workflow runs.
func goreleaser(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	v, err := exec.Command("../../../scripts/goreleaser-version").Output()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"run", "github.com/goreleaser/goreleaser/v2@" + strings.TrimSpace(string(v))}, args...)...)
	cmd.Dir = "../../.."
	return cmd
}

func TestGoreleaserCheck(t *testing.T) {
	if out, err := goreleaser(t, "check", "-f", ".goreleaser.yml").CombinedOutput(); err != nil {
		t.Fatalf("goreleaser check: %v\n%s", err, out)
	}
}
