package runner

// The helper process for work that must run as the runner's uid (its
// keyrings: keyrings.go). The agent starts its own executable again
// (/proc/self/exe) with keyHelperEnv set; this package's init sees it,
// drops the process to the uid and its group alone — every thread, the
// whole process — does the one piece of work, prints the answer as JSON and
// exits. The agent never changes a uid in its own process.
//
// The helper starts as root and drops itself, rather than being started as
// the uid: an executable the uid cannot read (a test binary in a private
// build folder) still works, and no file the uid could have touched is run.
// Once its ids change, the kernel marks it not dumpable, so a process of
// the uid cannot trace it. Its environment holds its request alone.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const keyHelperEnv = "GHRUNNER_AGENT_KEYRING_HELPER"

const (
	helperClear = "clear"
	helperList  = "list"
)

// keyHelperTimeout bounds one helper run; it does a handful of system calls.
const keyHelperTimeout = 30 * time.Second

// keyHelperAnswer is what the helper prints.
type keyHelperAnswer struct {
	Keys  []string `json:"keys,omitempty"`
	Error string   `json:"error,omitempty"`
}

func init() {
	if req := os.Getenv(keyHelperEnv); req != "" {
		os.Exit(serveKeyHelper(req))
	}
}

// askKeyHelper runs the helper for op as uid and gid and returns its answer.
func askKeyHelper(op string, uid, gid uint32) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), keyHelperTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Dir = "/"
	cmd.Env = []string{fmt.Sprintf("%s=%s:%d:%d", keyHelperEnv, op, uid, gid)}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ans keyHelperAnswer
	if jerr := json.Unmarshal(out, &ans); jerr != nil {
		return nil, fmt.Errorf("the keyring helper (%s as uid %d): %v; it said %q %q", op, uid, err, out, stderr.String())
	}
	if ans.Error != "" {
		return nil, fmt.Errorf("the keyring helper (%s as uid %d): %s", op, uid, ans.Error)
	}
	return ans.Keys, nil
}

// serveKeyHelper does the request in the helper process and returns its
// exit code.
func serveKeyHelper(req string) int {
	ans := keyHelperAnswer{}
	keys, err := keyHelperWork(req)
	ans.Keys = keys
	if err != nil {
		ans.Error = err.Error()
	}
	json.NewEncoder(os.Stdout).Encode(ans)
	if err != nil {
		return 1
	}
	return 0
}

func keyHelperWork(req string) ([]string, error) {
	parts := strings.Split(req, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%s=%q: want op:uid:gid", keyHelperEnv, req)
	}
	if op := parts[0]; op != helperClear && op != helperList {
		return nil, fmt.Errorf("%s=%q: the op is %q or %q", keyHelperEnv, req, helperClear, helperList)
	}
	uid, uerr := strconv.ParseUint(parts[1], 10, 32)
	gid, gerr := strconv.ParseUint(parts[2], 10, 32)
	if uerr != nil || gerr != nil || uid == 0 {
		return nil, fmt.Errorf("%s=%q: the uid and gid must be numbers, the uid not root's", keyHelperEnv, req)
	}
	// A fresh session keyring first: the agent's own is none of the uid's
	// business.
	if _, _, e := unix.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); e != 0 && e != unix.ENOSYS {
		return nil, fmt.Errorf("a session keyring of its own: %w", e)
	}
	// syscall's Set* change every thread of the process.
	if err := syscall.Setgroups(nil); err != nil {
		return nil, fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(int(gid), int(gid), int(gid)); err != nil {
		return nil, fmt.Errorf("setresgid %d: %w", gid, err)
	}
	if err := syscall.Setresuid(int(uid), int(uid), int(uid)); err != nil {
		return nil, fmt.Errorf("setresuid %d: %w", uid, err)
	}
	if parts[0] == helperClear {
		return nil, clearOwnKeyrings(uint32(uid))
	}
	return ownKeys(uint32(uid))
}
