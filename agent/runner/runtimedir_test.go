package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 36, item 4: a job of a user with a logind runtime folder
// (/run/user/<uid>) left files, folders and symlinks there for the next
// run; they were outside the wipe and Verify. Now Verify's check names
// them, the wipe removes them all without following a symlink out (a
// root-owned file and folder they point to are untouched), the folder
// itself stays (it may be a tmpfs mount), and the check then finds
// nothing; a runtime folder that is a symlink is refused, never emptied.
// (With clearRuntimeDir's removal disabled the test reports "after the
// wipe the runtime folder still holds [cache outside-file agent.sock
// next-run.sh outside-dir planted]", in the folder's order.)
func TestTheRunnerUsersRuntimeFolderIsWipedAndVerifiedWithoutFollowingSymlinks(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test plants files of another uid: run it as root (CI does)")
	}
	const uid = 54325
	root, outside := t.TempDir(), t.TempDir()
	dir := filepath.Join(root, "54325")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(dir, 0o700))
	must(os.Chown(dir, uid, uid))
	secret, keep := filepath.Join(outside, "root-file"), filepath.Join(outside, "root-dir")
	must(os.WriteFile(secret, []byte("root's"), 0o600))
	must(os.Mkdir(keep, 0o755))
	must(os.WriteFile(filepath.Join(keep, "inside"), nil, 0o644))
	for _, p := range []string{"planted", "next-run.sh", "agent.sock"} {
		must(os.WriteFile(filepath.Join(dir, p), []byte("left by run A"), 0o700))
		must(os.Lchown(filepath.Join(dir, p), uid, uid))
	}
	must(os.MkdirAll(filepath.Join(dir, "cache", "deep", "deeper"), 0o700))
	must(os.WriteFile(filepath.Join(dir, "cache", "deep", "deeper", "f"), nil, 0o600))
	must(os.Symlink(secret, filepath.Join(dir, "outside-file")))
	must(os.Symlink(keep, filepath.Join(dir, "outside-dir")))

	if names, err := runtimeLeftovers(root, uid); err != nil || len(names) != 6 {
		t.Fatalf("Verify's check found %v (%v), want the 6 entries planted", names, err)
	}
	must(clearRuntimeDir(root, uid))
	if names, err := runtimeLeftovers(root, uid); err != nil || len(names) != 0 {
		t.Fatalf("after the wipe the runtime folder still holds %v (%v)", names, err)
	}
	if info, err := os.Lstat(dir); err != nil || !info.IsDir() {
		t.Fatalf("the runtime folder itself is gone (it may be a mount point): %v", err)
	}
	if data, err := os.ReadFile(secret); err != nil || string(data) != "root's" {
		t.Fatalf("the wipe followed a symlink to a root file: %q %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(keep, "inside")); err != nil {
		t.Fatalf("the wipe followed a symlink into a root folder: %v", err)
	}

	// A runtime folder that is a symlink (only root could make one) is
	// refused by both, never emptied.
	must(os.Remove(dir))
	must(os.Symlink(keep, dir))
	if err := clearRuntimeDir(root, uid); err == nil || !strings.Contains(err.Error(), "left alone") {
		t.Fatalf("wipe of a symlinked runtime folder: %v", err)
	}
	if _, err := runtimeLeftovers(root, uid); err == nil {
		t.Fatal("Verify's check passed a symlinked runtime folder")
	}
	if _, err := os.Stat(filepath.Join(keep, "inside")); err != nil {
		t.Fatalf("the folder a symlinked runtime folder points to was emptied: %v", err)
	}
	// No runtime folder (no logind, or no session): nothing to do.
	must(os.Remove(dir))
	if err := clearRuntimeDir(root, uid); err != nil {
		t.Fatal(err)
	}
	if names, err := runtimeLeftovers(root, uid); err != nil || len(names) != 0 {
		t.Fatalf("%v %v", names, err)
	}
}
