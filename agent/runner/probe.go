package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"time"
)

// ProbeTimeout bounds the runner user's connection attempt: a REJECT rule
// answers at once, a DROP rule lets it wait this long.
const ProbeTimeout = 3 * time.Second

// Reaches says whether the runner user can open a TCP connection to addr
// (host:port): it tries as that user, the way a job would, with bash's
// /dev/tcp. A firewall rule user data applied can be flushed later (a
// firewall service reloading its rules); this checks the effect, not the
// rule. With no User there is no one to try as: ok is false.
func (r *Runner) Reaches(ctx context.Context, addr string) (reached, ok bool, err error) {
	if _, known, err := r.jobUID(); err != nil || !known {
		return false, false, err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false, false, fmt.Errorf("probe address %q: %w", addr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	// The address travels as arguments, never inside the script text.
	cmd, err := r.command(ctx, "bash", "-c", `exec 3<>"/dev/tcp/$1/$2"`, "probe", host, port)
	if err != nil {
		return false, false, err
	}
	cmd.Dir = "/"
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, true, nil
	case errors.As(err, &exit):
		return false, true, nil // refused, rejected or timed out
	default:
		return false, false, fmt.Errorf("probe as %s: %w", r.User, err)
	}
}
