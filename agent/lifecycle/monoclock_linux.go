package lifecycle

import (
	"cmp"
	"os"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// clockBoottime is CLOCK_BOOTTIME (linux/time.h).
const clockBoottime = 7

// sinceBoot reads CLOCK_BOOTTIME: monotonic like Go's own clock, but
// shared by every process of this boot, so that an agent restarted during
// a lease goes on counting it, and counting the time the instance spent
// hibernated, which the control plane's clock counts too.
func sinceBoot() (time.Duration, bool) {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockBoottime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

// bootID names this boot, read from file (the kernel's boot_id when
// ""): times since boot saved under another one mean nothing.
func bootID(file string) string {
	raw, err := os.ReadFile(cmp.Or(file, "/proc/sys/kernel/random/boot_id"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(raw))
}
