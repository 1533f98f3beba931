package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Files the job's user writes inside root's world-writable folders below
// /tmp (/tmp/.X11-unix, /tmp/.ICE-unix, as systemd-tmpfiles makes them)
// are removed and found, however deep, and only they: another user's file
// stays, and a symlink to a world-writable folder elsewhere is removed,
// never walked (issue 29 item 5). Shown to fail with the descent disabled
// (the walk stopping at the first level, as before): "found [], want the
// two planted files" and "left [.ICE-unix/deep/ghr-b ... .X11-unix/ghr-a
// ...]".
func TestTheWipeReachesTheBottomOfWorldWritableFolders(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test chowns files to another uid: run it as root (CI does)")
	}
	const uid = 54324
	tmp, outside := t.TempDir(), t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	shared := func(path string) {
		must(os.MkdirAll(path, 0o755))
		must(os.Chmod(path, 0o1777))
	}
	job := func(path string) {
		must(os.WriteFile(path, []byte("planted"), 0o600))
		must(os.Lchown(path, uid, uid))
	}
	shared(filepath.Join(tmp, ".X11-unix"))
	shared(filepath.Join(tmp, ".ICE-unix"))
	shared(filepath.Join(tmp, ".ICE-unix", "deep"))
	shared(outside)
	job(filepath.Join(tmp, ".X11-unix", "ghr-a"))
	job(filepath.Join(tmp, ".ICE-unix", "deep", "ghr-b"))
	job(filepath.Join(outside, "not-in-tmp"))
	must(os.WriteFile(filepath.Join(tmp, ".ICE-unix", "deep", "someone-elses"), nil, 0o600))
	// A folder of root's, not world-writable: the job could not write
	// there, and nothing in it is looked at.
	must(os.MkdirAll(filepath.Join(tmp, "roots"), 0o755))
	must(os.Symlink(outside, filepath.Join(tmp, ".X11-unix", "to-outside")))

	if got := ownedInTree(tmp, uid); len(got) != 2 {
		t.Errorf("found %v, want the two planted files", got)
	}
	must(removeOwnedTree(tmp, uid))
	var left []string
	filepath.Walk(tmp, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			rel, _ := filepath.Rel(tmp, path)
			left = append(left, rel)
		}
		return nil
	})
	if strings.Join(left, " ") != ".ICE-unix/deep/someone-elses .X11-unix/to-outside" {
		t.Fatalf("left %v, want someone-elses and root's symlink only", left)
	}
	if _, err := os.Stat(filepath.Join(outside, "not-in-tmp")); err != nil {
		t.Fatalf("the walk followed a symlink out of the tree: %v", err)
	}
	if got := ownedInTree(tmp, uid); len(got) != 0 {
		t.Fatalf("still found %v", got)
	}
}
