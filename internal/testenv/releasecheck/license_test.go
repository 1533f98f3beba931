package releasecheck

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The repository is licensed MPL-2.0, as HashiCorp's providers are: the
// standard text, whole, at the root (the Registry and GitHub read it
// there), and the module's repository, which scripts/module-tree writes
// for the Registry, carries the same file.
func TestTheRepositoryAndTheModuleTreeCarryTheMPL2Licence(t *testing.T) {
	licence, err := os.ReadFile("../../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	text := string(licence)
	if !strings.HasPrefix(text, "Mozilla Public License Version 2.0\n==================================\n") {
		t.Errorf("LICENSE does not start with the MPL-2.0 title:\n%.200s", text)
	}
	// The standard text's parts, first to last: a truncated copy misses
	// the exhibits.
	for _, part := range []string{"1. Definitions", "2. License Grants and Conditions", "10. Versions of the License",
		"Exhibit A - Source Code Form License Notice", `Exhibit B - "Incompatible With Secondary Licenses" Notice`,
		"defined by the Mozilla Public License, v. 2.0."} {
		if !strings.Contains(text, part) {
			t.Errorf("LICENSE lacks %q: not the whole MPL-2.0 text", part)
		}
	}
	if n := strings.Count(text, "\n"); n < 360 {
		t.Errorf("LICENSE has %d lines; the MPL-2.0 text has 373", n)
	}

	dest := filepath.Join(t.TempDir(), "runner-pool")
	if out, err := exec.Command("../../../scripts/module-tree", dest, "v0.1.0").CombinedOutput(); err != nil {
		t.Fatalf("scripts/module-tree: %v\n%s", err, out)
	}
	inTree, err := os.ReadFile(filepath.Join(dest, "LICENSE"))
	if err != nil {
		t.Fatalf("the module tree has no LICENSE: %v", err)
	}
	if !bytes.Equal(inTree, licence) {
		t.Error("the module tree's LICENSE differs from the repository's")
	}
}
