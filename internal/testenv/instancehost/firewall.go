package instancehost

import (
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"os/user"
	"strings"
)

// BlockIMDS rejects user's TCP connections to the metadata stub at
// endpoint (its URL), as user data's block-imds.sh rejects the runner
// user's traffic to 169.254.169.254 on an instance: the agent checks, as
// the runner user, that it cannot get through, and refuses to run jobs if
// it can. The returned func removes the rule. It needs root and iptables.
func BlockIMDS(name, endpoint string) (undo func(), err error) {
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil, fmt.Errorf("iptables not found: the tests keep the runner users from the metadata stub as instances do; install it with 'apt-get install -y iptables'")
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return nil, fmt.Errorf("metadata stub %q: %w", endpoint, err)
	}
	who, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	// By uid: a rule naming the user could not be deleted once it is gone.
	rule := []string{"OUTPUT", "-m", "owner", "--uid-owner", who.Uid, "-d", host, "-p", "tcp", "--dport", port, "-j", "REJECT"}
	if err := iptables(append([]string{"-I"}, rule...)...); err != nil {
		return nil, err
	}
	return func() { iptables(append([]string{"-D"}, rule...)...) }, nil
}

// iptables runs iptables, waiting for the lock other test processes hold.
func iptables(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w", "10"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
