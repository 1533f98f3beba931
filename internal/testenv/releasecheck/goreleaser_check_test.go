//go:build releasecheck

package releasecheck

import (
	"os/exec"
	"testing"
)

// goreleaserVersion is the newest goreleaser that builds here: v2.16 and
// v2.17 need a module the proxy refuses (go.digitalxero.dev/go-msix), v2.18
// needs Go 1.27.
const goreleaserVersion = "v2.15.1"

func TestGoreleaserCheck(t *testing.T) {
	cmd := exec.Command("go", "run", "github.com/goreleaser/goreleaser/v2@"+goreleaserVersion, "check", "-f", ".goreleaser.yml")
	cmd.Dir = "../../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("goreleaser check: %v\n%s", err, out)
	}
}
