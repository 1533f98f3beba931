package runner

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestAFreshCopyOnAnotherFileSystemIsACopy: a runner copy is hard links to
// the install, which cannot cross file systems (an install on its own
// volume, a run folder on tmpfs): then each file is copied, with its mode.
func TestAFreshCopyOnAnotherFileSystemIsACopy(t *testing.T) {
	install, err := os.MkdirTemp("/dev/shm", "ghr-install")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(install)
	var shm, tmp syscall.Statfs_t
	dir := t.TempDir()
	if syscall.Statfs(install, &shm) != nil || syscall.Statfs(dir, &tmp) != nil || shm.Type == tmp.Type {
		t.Fatalf("/dev/shm and %s are one kind of file system here: the test cannot cross file systems", dir)
	}
	if err := os.WriteFile(filepath.Join(install, "config.sh"), []byte("#!/bin/sh\necho configured\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Install: install, Dir: filepath.Join(dir, "run"), WorkDir: filepath.Join(dir, "work"), StateDir: filepath.Join(dir, "state")}
	if err := r.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := r.fresh(map[string][]byte{".runner": []byte("{}")}); err != nil {
		t.Fatalf("fresh across file systems: %v", err)
	}
	src, _ := os.Stat(filepath.Join(install, "config.sh"))
	got, err := os.Stat(filepath.Join(r.Dir, "config.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(src, got) || got.Mode().Perm() != 0o755 {
		t.Fatalf("copy: same file %v, mode %v; want a copy with mode 0755", os.SameFile(src, got), got.Mode().Perm())
	}
	if raw, _ := os.ReadFile(filepath.Join(r.Dir, "config.sh")); string(raw) != "#!/bin/sh\necho configured\n" {
		t.Fatalf("copy holds %q", raw)
	}
}
