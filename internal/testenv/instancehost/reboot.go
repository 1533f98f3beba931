package instancehost

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/runner"
)

// An instance stopped and started again, as EC2 does it, on one machine.
// A stop shuts the guest down: systemd stops the agent (SIGTERM, then
// SIGKILL), every process ends, and what lived in memory is gone (the
// run folder: /run is a tmpfs); the EBS root volume keeps the rest (the
// runner's install, the agent's state, the runner user's home). A start
// boots it again: a new boot (a new boot id, CLOCK_BOOTTIME from zero on
// EC2: the host cannot reset the clock, so the agent is given a boot id
// of its own, which is what tells it its saved lease anchors are from
// another boot), new instance-profile credentials from the metadata
// service, and the agent started by systemd, not by the user data (which
// cloud-init runs once per instance).

// bootIDFile is the file under an instance's folder that names its boot
// (the agent's bootIdFile).
const bootIDFile = "boot_id"

// BootID is the boot the instance's agent runs under: "" until its first
// start after a stop (the agent then takes the system's).
func (a *Agent) BootID() string {
	b, _ := os.ReadFile(filepath.Join(a.Dir, bootIDFile))
	return strings.TrimSpace(string(b))
}

// haltAgent shuts an instance's agent and processes down for a stop; its
// user, folders, metadata service and output stay.
func (h *Host) haltAgent(a *Agent) {
	if a.cmd != nil && a.killGroup(syscall.SIGTERM) {
		select {
		case <-a.exited:
		case <-time.After(5 * time.Second):
			a.killGroup(syscall.SIGKILL)
			<-a.exited
		}
	}
	killRunnerGroups(a.Dir)
	runner.RemoveCgroup(filepath.Join(a.Dir, "run"))
	if err := os.RemoveAll(filepath.Join(a.Dir, "run")); err != nil {
		h.note(fmt.Errorf("instance %s: clear its run folder at stop: %w", a.InstanceID, err))
	}
	h.mu.Lock()
	a.haltDone = true
	h.mu.Unlock()
}

// boot readies a halted instance's agent for its next start: a new boot,
// the role's credentials issued anew.
func (h *Host) boot(a *Agent) error {
	if err := newBoot(a); err != nil {
		return err
	}
	if h.opts.Role != nil {
		role, creds, err := h.opts.Role(a.InstanceID)
		if err != nil {
			h.note(fmt.Errorf("instance %s: its role at boot: %w", a.InstanceID, err))
		} else {
			a.IMDS.SetRole(role, creds)
		}
	}
	h.mu.Lock()
	a.halted, a.haltDone = false, false
	h.mu.Unlock()
	return nil
}

// newBoot names a new boot of a's instance.
func newBoot(a *Agent) error {
	a.Boots++
	return os.WriteFile(filepath.Join(a.Dir, bootIDFile), []byte(rand.Text()+"\n"), 0o644)
}
