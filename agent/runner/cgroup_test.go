package runner

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Where the host has a writable cgroup v2 hierarchy, run.sh and all it
// starts live in the runner's own cgroup, and KillUserProcesses ends them
// all with cgroup.kill, even a process that no longer runs as the runner
// user (here the runner is the agent's own user, root, whose processes the
// uid-based kill never touches: it stands for a job's set-user-ID program)
// and left run.sh's process group (setsid). Shown to fail with the cgroup
// disabled (cgroup() returning none): "the daemon run.sh left outside its
// process group still runs".
func TestARunnersCgroupTakesEverythingItStartedWithIt(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test makes a cgroup: run it as root (CI does)")
	}
	dir, state := t.TempDir(), t.TempDir()
	r := &Runner{Dir: dir, StateDir: state, WorkDir: filepath.Join(dir, "work")}
	cg, _ := r.cgroup()
	if cg == "" {
		t.Fatalf("no writable cgroup v2 hierarchy with cgroup.kill in %v: this host needs one (mount -t cgroup2 none /sys/fs/cgroup, Linux 5.14 or later)", CgroupRoots)
	}
	t.Cleanup(func() { removeCgroupDir(cg) })
	pidFile := filepath.Join(dir, "daemon.pid")
	script := "#!/bin/sh\nsetsid sleep 300 </dev/null >/dev/null 2>&1 &\necho $! >" + pidFile + "\nexec sleep 300\n"
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	var daemon int
	for deadline := time.Now().Add(5 * time.Second); daemon == 0; time.Sleep(20 * time.Millisecond) {
		raw, _ := os.ReadFile(pidFile)
		daemon, _ = strconv.Atoi(strings.TrimSpace(string(raw)))
		if time.Now().After(deadline) {
			t.Fatal("run.sh never started its daemon")
		}
	}
	t.Cleanup(func() { syscall.Kill(daemon, syscall.SIGKILL) })
	if err := r.Stop(time.Second); err != nil {
		t.Logf("stop: %v", err)
	}
	if syscall.Kill(daemon, 0) != nil {
		t.Fatal("stopping run.sh killed the daemon already: the test proves nothing")
	}
	if _, err := r.KillUserProcesses(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // reaped by init
	if raw, err := os.ReadFile("/proc/" + strconv.Itoa(daemon) + "/status"); err == nil && !strings.Contains(string(raw), "State:\tZ") {
		t.Fatal("the daemon run.sh left outside its process group still runs")
	}
	if err := r.Verify(); err != nil && strings.Contains(err.Error(), "cgroup") {
		t.Fatalf("Verify: %v", err)
	}
}

// After a kill, the runner's next commands (config.sh remove, the next
// just-in-time run.sh) run: on Linux 6.18 a process cloned into a cgroup
// after its cgroup.kill is killed at birth, so a killed cgroup is replaced
// by a new one. Shown to fail without renewCgroup: "config.sh after the
// kill: \"\" signal: killed".
func TestTheRunnersCommandsRunAgainAfterItsCgroupWasKilled(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test makes a cgroup: run it as root (CI does)")
	}
	dir, state := t.TempDir(), t.TempDir()
	r := &Runner{Dir: dir, StateDir: state, WorkDir: filepath.Join(dir, "work")}
	if cg, _ := r.cgroup(); cg == "" {
		t.Fatalf("no writable cgroup v2 hierarchy with cgroup.kill in %v", CgroupRoots)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\nsetsid sleep 300 </dev/null >/dev/null 2>&1 &\nexec sleep 300\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	r.Stop(time.Second)
	if n, err := r.KillUserProcesses(); err != nil || n != 1 {
		t.Fatalf("killed %d (%v), want the daemon", n, err)
	}
	for i := 0; i < 2; i++ {
		if out, err := r.run(context.Background(), "tok", "/bin/sh", "-c", "echo hi"); err != nil || string(out) != "hi\n" {
			t.Fatalf("config.sh after the kill: %q %v", out, err)
		}
	}
	if cg, _ := r.cgroup(); cg != "" {
		t.Cleanup(func() { removeCgroupDir(cg) })
	}
}
