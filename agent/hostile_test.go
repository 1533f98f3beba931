package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/instancehost"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/testbin"
)

// jobUser creates an unprivileged user for the runner, as user data does on
// an instance (the tests run as root), with its home in the test's folder;
// it is deleted, with whatever still runs as it, when the test ends. Each
// test has its own: the agent kills every process of its runner user.
func (w *world) jobUser() string {
	w.t.Helper()
	if os.Getuid() != 0 {
		w.t.Fatal("this test creates a user for the runner: run it as root (CI does)")
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		w.t.Fatal("useradd is needed to create the runner user: apt-get install passwd")
	}
	raw := make([]byte, 4)
	rand.Read(raw)
	name := "ghrt" + hex.EncodeToString(raw)
	must(w.t, instancehost.AddUser(name, filepath.Join(w.dir, "home")))
	w.t.Cleanup(func() { instancehost.DeleteUser(name) })
	// As user data does on an instance: the agent refuses to run jobs
	// for a runner user that reaches the metadata service.
	unblock, err := instancehost.BlockIMDS(name, w.imds.URL())
	must(w.t, err)
	w.unblock = sync.OnceFunc(unblock)
	w.t.Cleanup(w.unblock)
	must(w.t, instancehost.Reachable(w.dir)) // the runner user's folders are under the test's own
	w.configure(func(c *config.Config) { c.RunnerUser = name })
	return name
}

// hostileScript is a script of testdata with the variables it reads.
func (w *world) hostileScript(file string, vars map[string]string) string {
	w.t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", file))
	must(w.t, err)
	var b strings.Builder
	for k, v := range vars {
		fmt.Fprintf(&b, "%s='%s'\n", k, v)
	}
	return b.String() + string(body)
}

// hostileVars makes what the hostile scripts (testdata/hostile-run-*.sh)
// are given, for the runner user uid, once the agent started: a drop box
// the wipe leaves alone, a file of root's, root's world-writable folders
// in /tmp (as systemd-tmpfiles makes /tmp/.X11-unix), hostilejob.
func (w *world) hostileVars(uid string) map[string]string {
	t := w.t
	drop, target := filepath.Join(w.dir, "drop"), filepath.Join(w.dir, "precious")
	must(t, os.Mkdir(drop, 0o755))
	must(t, os.Chmod(drop, 0o1777)) // the wipe leaves it: whatever survives reports here
	must(t, os.WriteFile(target, []byte("precious\n"), 0o644))
	tag := filepath.Base(w.dir) + uid
	ww := filepath.Join("/tmp", "ghr-ww-"+tag)
	must(t, os.MkdirAll(filepath.Join(ww, "deep"), 0o755))
	must(t, os.Chmod(ww, 0o1777))
	must(t, os.Chmod(filepath.Join(ww, "deep"), 0o1777))
	t.Cleanup(func() { os.RemoveAll(ww) })
	hj, err := testbin.Build(testbin.Module + "/internal/testenv/hostilejob")
	must(t, err)
	vars := map[string]string{"R": filepath.Join(w.dir, "run"), "I": filepath.Join(w.dir, "runner"), "W": filepath.Join(w.dir, "work"),
		"D": drop, "T": target, "TAG": tag, "AGENT": fmt.Sprint(w.agent.Process.Pid), "HJ": hj, "WW": ww}
	imdsAddr, err := url.Parse(w.imds.URL())
	must(t, err)
	vars["IMDS_HOST"], vars["IMDS_PORT"] = imdsAddr.Hostname(), imdsAddr.Port()
	return vars
}

// checkHostileA fails the test unless run A's hostile job ran all it
// tried, and breached nothing while it ran; then clears its liveness
// files, so that a later one says something outlived the run.
func checkHostileA(t *testing.T, a fakegithub.Job, drop string) {
	t.Helper()
	if a.ExitCode != 0 || !strings.Contains(a.Output, "run A done") || strings.Contains(a.Output, "BREACH") || strings.Contains(a.Output, "hostilejob") {
		t.Fatalf("run A's job (exit %d):\n%s", a.ExitCode, a.Output)
	}
	for _, f := range []string{"nohup-alive", "thread-alive"} {
		if _, err := os.Stat(filepath.Join(drop, f)); err != nil {
			t.Fatalf("run A's %s loop never ran, the suite proves nothing: %v", f, err)
		}
	}
}

// checkSpied fails the test when what outlived run A's job saw a secret
// of what came after it, or still runs.
func checkSpied(t *testing.T, drop string, secrets map[string]string) {
	t.Helper()
	spy, _ := os.ReadFile(filepath.Join(drop, "spy"))
	for what, secret := range secrets {
		if strings.Contains(string(spy), secret) {
			t.Errorf("run A's spy saw %s", what)
		}
	}
	for _, f := range []string{"nohup-alive", "thread-alive"} {
		if _, err := os.Stat(filepath.Join(drop, f)); err == nil {
			t.Errorf("run A's %s loop outlived its job", f)
		}
	}
}

// clearAlive removes the liveness files of run A's loops once its job is
// cleaned up after: any that comes back was written by a survivor.
func clearAlive(t *testing.T, drop string) {
	t.Helper()
	for _, f := range []string{"nohup-alive", "thread-alive"} {
		must(t, os.Remove(filepath.Join(drop, f)))
	}
}

// TestAHostileJobOfOneRunReachesNothingOfTheNext is the hostile-job suite
// (docs/security.md): run A's job, as a real unprivileged runner user,
// tries every way it has to persist on the instance or spy on the next run
// (testdata/hostile-run-a.sh); the instance is released, pooled and claimed
// by run B, whose job finds nothing of A (testdata/hostile-run-b.sh), and
// whatever of A could have survived never saw B's token, its workspace or
// the remove token of A's own runner.
func TestAHostileJobOfOneRunReachesNothingOfTheNext(t *testing.T) {
	t.Parallel() // its own world: instance, users, fake GitHub, daemon
	w := newWorld(t, "")
	name := w.jobUser()
	u, err := user.Lookup(name)
	must(t, err)
	w.start()
	vars := w.hostileVars(u.Uid)
	drop, target, tag := vars["D"], vars["T"], vars["TAG"]

	inst := w.create("run-a", "on-demand")
	running := w.markRunning(inst)
	checkHostileA(t, w.job("run-a", w.hostileScript("hostile-run-a.sh", vars)), drop)

	// What polkit may let a job's own session do (loginctl enable-linger):
	// its systemd user manager, and the units the job wrote in its home,
	// would start again at every boot.
	linger := filepath.Join("/var/lib/systemd/linger", name)
	must(t, os.MkdirAll(filepath.Dir(linger), 0o755))
	must(t, os.WriteFile(linger, nil, 0o644))
	t.Cleanup(func() { os.Remove(linger) })

	removal := w.removal()
	idle, err := w.store.Release(ctx, running.Ref(), "run-a", 15*time.Minute, removal)
	must(t, err)
	clean := w.wait(idle, state.SignalRemoveRegOK, state.SignalRemoveRegFailed)
	if _, ok := clean.SignalFor(state.SignalRemoveRegOK); !ok {
		t.Fatalf("after run A: %v", clean.Signals)
	}
	clearAlive(t, drop)
	if _, err := os.Lstat(linger); err == nil {
		t.Error("the runner user still lingers after run A")
	}

	claimed, err := w.store.Claim(ctx, idle.Key, state.ClaimRequest{RunID: "run-b", Pool: "linux", Owner: "acme", ClaimTTL: 5 * time.Minute, Registration: w.registration()})
	must(t, err)
	tokenB := claimed.Registration.Token
	got := w.wait(claimed, state.SignalRegOK, state.SignalRegFailed)
	if _, ok := got.SignalFor(state.SignalRegOK); !ok {
		t.Fatalf("run B's runner not registered: %v", got.Signals)
	}
	if b := w.job("run-b", w.hostileScript("hostile-run-b.sh", vars)); b.ExitCode != 0 {
		t.Fatalf("run B found run A's leftovers:\n%s", b.Output)
	}

	checkSpied(t, drop, map[string]string{"run B's registration token": tokenB, "run A's remove token": removal.Token, "run B's workspace": "run-b-marker-" + tag})
	if ran, err := os.ReadFile(filepath.Join(drop, "planted-ran")); err == nil {
		t.Errorf("a script run A planted in its runner copy ran:\n%s", ran)
	}
	if got, _ := os.ReadFile(target); string(got) != "precious\n" {
		t.Errorf("root wrote through a planted symlink: the target holds %q", got)
	}
}
