package runner

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A job owns the runner directory (issue 16 item 4). What it plants there
// must not steer the agent, which runs as root: a symlink named like the
// PID file is not written through, and the PID the agent adopts after a
// restart is the one it noted in its own state directory, not one a job
// wrote.
func TestStartKeepsItsPIDOutOfTheJobsReach(t *testing.T) {
	dir, state, outside := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(outside, "etc-shadow")
	if err := os.WriteFile(target, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// What a job of an earlier run left: the PID file's old name, as a
	// symlink to a file of root's, and a forged PID.
	if err := os.Symlink(target, filepath.Join(dir, PIDFile)); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Dir: dir, StateDir: state}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(5 * time.Second) })

	if got, _ := os.ReadFile(target); string(got) != "precious\n" {
		t.Fatalf("the file behind the planted symlink now holds %q", got)
	}
	raw, err := os.ReadFile(filepath.Join(state, PIDFile))
	if err != nil {
		t.Fatal(err)
	}
	if pid, _ := strconv.Atoi(strings.TrimSpace(string(raw))); pid != r.PID() || pid == 0 {
		t.Fatalf("noted pid %q, run.sh is %d", raw, r.PID())
	}
	// A restarted agent adopts run.sh by the state directory's note.
	again := &Runner{Dir: dir, StateDir: state}
	if alive, _ := again.Alive(); !alive {
		t.Fatal("a restarted agent did not find its run.sh")
	}

	// The state directory's own note, replaced by a symlink (it should
	// never be, being root's): still not followed.
	if err := os.Remove(filepath.Join(state, PIDFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(state, PIDFile)); err != nil {
		t.Fatal(err)
	}
	if err := writeFileNoFollow(filepath.Join(state, PIDFile), []byte("1")); err == nil {
		t.Fatal("writeFileNoFollow wrote through a symlink")
	}
	if got, _ := os.ReadFile(target); string(got) != "precious\n" {
		t.Fatalf("the file behind the symlink now holds %q", got)
	}
}

func TestStartWithoutAStateDirIsRefused(t *testing.T) {
	if err := (&Runner{Dir: t.TempDir()}).Start(); err == nil || !strings.Contains(err.Error(), "StateDir") {
		t.Fatalf("got %v, want StateDir required", err)
	}
}

// The runner user keeps its supplementary groups (issue 16): Go's
// Credential without Groups calls setgroups with none, so a runner user in
// the docker group lost it.
func TestCommandsRunWithTheUsersGroups(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	want, err := me.GroupIds()
	if err != nil || len(want) == 0 {
		t.Fatalf("the current user's groups: %v %v", want, err)
	}
	cmd, err := (&Runner{Dir: t.TempDir(), User: me.Username}).command(context.Background(), "true")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range cmd.SysProcAttr.Credential.Groups {
		got = append(got, strconv.FormatUint(uint64(g), 10))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("groups %v, want the user database's %v", got, want)
	}
}

// A process a job left behind, out of the runner's process group (setsid),
// is found by its user and killed (issue 16 item 2).
func TestKillUIDKillsWhatAJobLeftBehind(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test starts processes as another uid: run it as root (CI does)")
	}
	const uid = 54321 // no such user needed: the kernel takes any uid
	cmd := exec.Command("setsid", "sh", "-c", "sleep 60 & sleep 60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids, err := processesOf(uid)
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the left-behind processes did not start: %v", pids)
		}
		time.Sleep(20 * time.Millisecond)
	}
	n, err := killUID(uid)
	if err != nil || n < 2 {
		t.Fatalf("killed %d, %v; want both", n, err)
	}
	if pids, _ := processesOf(uid); len(pids) != 0 {
		t.Fatalf("still alive: %v", pids)
	}
}

func TestKillUserProcessesNeverKillsTheAgentsOwnUser(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := (&Runner{User: me.Username}).KillUserProcesses(); err == nil || n != 0 {
		t.Fatalf("killed %d processes of the agent's own user (%v)", n, err)
	}
	if n, err := (&Runner{}).KillUserProcesses(); err != nil || n != 0 {
		t.Fatalf("no runner user: %d, %v", n, err)
	}
}

// What a job leaves in shared temporary places is removed, and only that
// (issue 16 item 5): a file of another user stays, a symlink the job made
// goes without what it points to.
func TestRemoveOwnedByTakesOnlyTheJobsFiles(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test chowns files to another uid: run it as root (CI does)")
	}
	const uid = 54321
	tmp, outside := t.TempDir(), t.TempDir()
	precious := filepath.Join(outside, "precious")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(precious, []byte("keep"), 0o600))
	must(os.MkdirAll(filepath.Join(tmp, "job-cache", "deep"), 0o755))
	must(os.WriteFile(filepath.Join(tmp, "job-cache", "deep", "token"), []byte("secret"), 0o600))
	must(os.WriteFile(filepath.Join(tmp, "planted.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Symlink(precious, filepath.Join(tmp, "link")))
	must(os.WriteFile(filepath.Join(tmp, "someone-elses"), []byte("x"), 0o600))
	for _, p := range []string{"job-cache", "job-cache/deep", "job-cache/deep/token", "planted.sh"} {
		must(os.Chown(filepath.Join(tmp, p), uid, uid))
	}
	must(os.Lchown(filepath.Join(tmp, "link"), uid, uid))

	must(removeOwnedBy(tmp, uid))
	var left []string
	entries, _ := os.ReadDir(tmp)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if strings.Join(left, ",") != "someone-elses" {
		t.Fatalf("left %v, want only someone-elses", left)
	}
	if got, err := os.ReadFile(precious); err != nil || string(got) != "keep" {
		t.Fatalf("the symlink's target: %q, %v", got, err)
	}
}

// Verify finds what a cleanup left (issue 16, "verification before
// pooling"): a non-empty work folder, a runner copy still there, an install
// someone else may write. Once all is as it should be, it passes.
func TestVerifyFindsWhatACleanupLeft(t *testing.T) {
	root := t.TempDir()
	r := &Runner{Install: filepath.Join(root, "install"), Dir: filepath.Join(root, "run"), WorkDir: filepath.Join(root, "work"), StateDir: filepath.Join(root, "state")}
	for _, d := range []string{r.Install, r.Dir, r.WorkDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(r.Install, "config.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(r.Install, "config.sh"), 0o775); err != nil { // the group may write it
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.WorkDir, "checkout"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := r.Verify()
	for _, want := range []string{"work folder", "runner copy", "config.sh is no longer the agent's alone"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Verify: %v; want it to name the %s", err, want)
		}
	}
	if err := r.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := r.Wipe(); err != nil {
		t.Fatal(err)
	}
	if err := r.Verify(); err != nil {
		t.Fatalf("after Seal and Wipe: %v", err)
	}
}
