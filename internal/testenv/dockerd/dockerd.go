// Package dockerd runs a real docker daemon for a test: its own data and
// run folders, the vfs storage driver and no bridge or iptables rules, so
// it needs nothing of the machine but the dockerd, containerd and runc
// binaries (Debian's docker.io) and touches nothing another test uses.
// Images come from the tests themselves (docker import of a static
// program): the machine may reach no registry.
package dockerd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/pinned"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/testbin"
)

// Daemon is a running dockerd.
type Daemon struct {
	// Host is its address, for DOCKER_HOST or docker --host.
	Host string
	dir  string
}

// Start starts a daemon that stops, and whose folders go, when t ends. Its
// socket is open to every user: the tests' runner users are not in a
// docker group.
func Start(t testing.TB) *Daemon {
	t.Helper()
	for _, bin := range []string{"dockerd", "containerd", "runc", "docker"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s not found: these tests run a real docker daemon; install it with 'apt-get install -y docker.io' (make tools does)", bin)
		}
	}
	// A short path: the daemon's sockets live under it (108-byte limit).
	dir, err := os.MkdirTemp("", "ghrd")
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Host: "unix://" + filepath.Join(dir, "docker.sock"), dir: dir}
	var log bytes.Buffer
	cmd := exec.Command("dockerd", "--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "x"),
		"--pidfile", filepath.Join(dir, "pid"), "--host", d.Host, "--storage-driver", "vfs",
		"--bridge", "none", "--iptables=false", "--ip6tables=false", "--ip-masq=false")
	cmd.Stdout, cmd.Stderr = &log, &log
	// The daemon goes with the test process, even one that is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := pinned.Start(cmd); err != nil {
		t.Fatalf("start dockerd: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		unmountBelow(dir)
		os.RemoveAll(dir)
	})
	sock := filepath.Join(dir, "docker.sock")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := d.run("version"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dockerd did not answer within 30 s:\n%s", log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// Image makes an image named tag holding the sleeper program (entry point
// /sleeper) and returns its id.
func (d *Daemon) Image(t testing.TB, tag string) string {
	t.Helper()
	bin, err := testbin.Build(testbin.Module + "/internal/testenv/dockerd/sleeper")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	raw, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "sleeper"), raw, 0o755); err != nil {
		t.Fatal(err)
	}
	// A label makes each image distinct even from the same program.
	tar := exec.Command("tar", "-C", root, "-c", ".")
	imp := exec.Command("docker", "--host", d.Host, "import", "--change", "LABEL ghr.test="+tag, "--change", `ENTRYPOINT ["/sleeper"]`, "-", tag)
	imp.Stdin, _ = tar.StdoutPipe()
	var out bytes.Buffer
	imp.Stdout, imp.Stderr = &out, &out
	if err := imp.Start(); err != nil {
		t.Fatal(err)
	}
	if err := tar.Run(); err != nil {
		t.Fatal(err)
	}
	if err := imp.Wait(); err != nil {
		t.Fatalf("docker import %s: %v\n%s", tag, err, out.String())
	}
	return strings.TrimSpace(out.String())
}

// Docker runs the docker command against the daemon and returns its
// output; it fails t on error.
func (d *Daemon) Docker(t testing.TB, args ...string) string {
	t.Helper()
	out, err := d.run(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (d *Daemon) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", append([]string{"--host", d.Host}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// SwarmInit makes the daemon the manager of a swarm of its own. It listens
// on a port the kernel picks: another test's daemon may be in a swarm too.
func (d *Daemon) SwarmInit(t testing.TB) {
	t.Helper()
	d.Docker(t, "swarm", "init", "--advertise-addr", "127.0.0.1", "--listen-addr", "127.0.0.1:0")
}

// Plugin creates a (disabled) plugin named name from a folder, as a job
// can without a registry: docker plugin create reads a config.json and a
// root file system.
func (d *Daemon) Plugin(t testing.TB, name string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "rootfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	config := `{"description":"a test plugin","documentation":"-","entrypoint":["/sleeper"],` +
		`"interface":{"types":["docker.volumedriver/1.0"],"socket":"p.sock"},"network":{"type":"host"}}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Docker(t, "plugin", "create", name, dir)
}

// WaitRunning waits until a container whose name starts with prefix runs
// (a swarm task starts a moment after its service is created).
func (d *Daemon) WaitRunning(t testing.TB, prefix string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if out, _ := d.run("ps", "--quiet", "--filter", "name=^"+prefix); out != "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no container %s* runs within 30 s", prefix)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// unmountBelow detaches what is still mounted below dir: a daemon that was
// in a swarm leaves its network namespace mounted under its exec root, and
// the folder could not go.
func unmountBelow(dir string) {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			syscall.Unmount(f[4], syscall.MNT_DETACH)
		}
	}
}
