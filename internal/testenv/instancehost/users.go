package instancehost

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// The instance's users: the unprivileged runner user each instance gets, as
// user data creates it, deleted with the instance, and the folders it must
// reach.

// addUser creates the runner user of an instance, with its home in home.
func addUser(instanceID, home string) (string, error) {
	name := "gr-" + instanceID // at most 32 characters: gr-i- and 17 hex digits
	if len(name) > 32 {
		name = name[:32]
	}
	return name, AddUser(name, home)
}

// AddUser creates an unprivileged user with its own group and its home in
// home, as user data creates the runner user; one that exists already is
// kept. It needs root.
func AddUser(name, home string) error {
	// Other test processes add and delete users too: useradd fails at once
	// (exit 10) while another holds the lock on /etc/passwd.
	for attempt := 1; ; attempt++ {
		out, err := exec.Command("useradd", "--create-home", "--home-dir", home, "--shell", "/bin/bash", "--user-group", name).CombinedOutput()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ee) && ee.ExitCode() == 9:
			return nil // made by an earlier start that failed later
		case errors.As(err, &ee) && ee.ExitCode() == 10 && attempt < 50:
			time.Sleep(time.Duration(50+rand.IntN(150)) * time.Millisecond)
		default:
			return fmt.Errorf("useradd %s: %v: %s", name, err, out)
		}
	}
}

// Reachable lets every user traverse dir and its parents (read and
// search for others): a test's temporary folders are its own (0700), and
// an unprivileged runner user must reach its folders under them.
func Reachable(dir string) error {
	for ; dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if info, err := os.Stat(dir); err == nil && info.Mode().Perm()&0o005 != 0o005 {
			if err := os.Chmod(dir, info.Mode().Perm()|0o005); err != nil {
				return err
			}
		}
	}
	return nil
}

// DeleteUser kills whatever still runs as the user, then deletes it.
func DeleteUser(name string) {
	if name == "" {
		return
	}
	for range 50 {
		exec.Command("pkill", "-KILL", "-u", name).Run()
		if exec.Command("userdel", name).Run() == nil {
			return
		}
		time.Sleep(time.Duration(50+rand.IntN(150)) * time.Millisecond)
	}
}
