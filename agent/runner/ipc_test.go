package runner

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// What a job leaves in the kernel for the next job of its uid (issue 29
// item 5): SysV shared memory, message queue and semaphore set, a POSIX
// message queue (/dev/mqueue mounted or not) and keys in the uid's user,
// user-session and persistent keyrings. The wipe removes them all, Verify's checks
// find them before and not after, and the uid itself finds none.
// Shown to fail with removeIPC and clearKeyrings disabled: "left after
// the wipe: [SysV shm 6 SysV msg 6 SysV sem 6 POSIX message queue
// /ghr-mq-wipe]" and "keys left after the wipe: [key
// \"user;54325;54325;3f010000;ghr-planted-wipe\" in the user keyring ...]";
// with the persistent keyring alone left uncleared: "keys left after the
// wipe: [key \"user;54325;54325;3f010000;ghr-planted-wipe\" in the
// persistent keyring]".
func TestTheWipeRemovesTheJobsIPCObjectsAndKeys(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test runs a job as another uid: run it as root (CI does)")
	}
	const uid = 54325
	asJob := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(hostileJob(t), args...)
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("hostilejob %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	removeIPC(uid) // what an interrupted run of this test left
	clearKeyrings(uid, uid)
	asJob("plant-ipc", "wipe")
	t.Cleanup(func() { removeIPC(uid); clearKeyrings(uid, uid) })
	objs, err := ipcOf(uid)
	if err != nil || len(objs) != 4 {
		t.Fatalf("found %v (%v), want the 3 SysV objects and the POSIX queue the job left", objs, err)
	}
	keys, err := keysOf(uid, uid)
	if err != nil || len(keys) < 2 {
		t.Fatalf("found keys %v (%v), want the one the job left in each keyring", keys, err)
	}
	t.Logf("the job left %v", keys)

	if err := removeIPC(uid); err != nil {
		t.Fatal(err)
	}
	if err := clearKeyrings(uid, uid); err != nil {
		t.Fatal(err)
	}
	if objs, err := ipcOf(uid); err != nil || len(objs) != 0 {
		t.Errorf("left after the wipe: %v (%v)", objs, err)
	}
	if keys, err := keysOf(uid, uid); err != nil || len(keys) != 0 {
		t.Errorf("keys left after the wipe: %v (%v)", keys, err)
	}
	if out := asJob("probe-ipc"); strings.TrimSpace(out) != "" {
		t.Errorf("the next job of the uid finds:\n%s", out)
	}
}
