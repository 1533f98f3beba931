package fakegithub_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
)

func TestFakeRunnerContract(t *testing.T) {
	fake := fakegithub.New("acme")
	defer fake.Close()
	gh, err := github.New(github.Config{BaseURL: fake.URL(), AppID: fake.AppID, PrivateKeyPEM: fake.PrivateKeyPEM})
	if err != nil {
		t.Fatal(err)
	}
	bin, err := fakegithub.BuildRunner()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	runnerDir, work := filepath.Join(dir, "runner"), filepath.Join(dir, "work")
	if err := fakegithub.InstallRunner(runnerDir, bin); err != nil {
		t.Fatal(err)
	}
	sh := func(args ...string) (string, error) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = runnerDir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	// A bad token is refused with a non-zero exit and leaves nothing behind.
	if out, err := sh("./config.sh", "--unattended", "--url", gh.RunnerURL("acme"), "--token", "nope", "--name", "r1", "--labels", "run-1", "--no-default-labels", "--work", work, "--replace"); err == nil || !strings.Contains(out, "invalid") {
		t.Fatalf("bad token: %v %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(runnerDir, ".runner")); err == nil {
		t.Fatal(".runner written after a refused registration")
	}

	tok, _, err := gh.RegistrationToken(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := sh("./config.sh", "--unattended", "--url", gh.RunnerURL("acme"), "--token", tok, "--name", "ghr-1-i-1", "--labels", "run-1", "--no-default-labels", "--work", work, "--replace"); err != nil {
		t.Fatalf("config: %v %s", err, out)
	}
	raw, _ := os.ReadFile(filepath.Join(runnerDir, ".runner"))
	if !strings.Contains(string(raw), `"agentId"`) || !strings.Contains(string(raw), work) {
		t.Fatalf(".runner = %s", raw)
	}
	runners := fake.Runners()
	if len(runners) != 1 || runners[0].Name != "ghr-1-i-1" || len(runners[0].Labels) != 1 || runners[0].Labels[0] != "run-1" || runners[0].Online {
		t.Fatalf("runners after config = %+v", runners)
	}

	other := fake.EnqueueJob("run-2", "echo wrong runner")
	job := fake.EnqueueJob("run-1", "sleep 0.5; pwd; echo data > file.txt")
	run := exec.Command("./run.sh")
	run.Dir = runnerDir
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	// Busy while the job runs.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if rs := fake.Runners(); len(rs) == 1 && rs[0].Busy && rs[0].Online {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if rs := fake.Runners(); !rs[0].Busy || !rs[0].Online {
		t.Fatalf("runner not online and busy during its job: %+v", rs[0])
	}
	// A stop during the job lets the job finish first.
	run.Process.Signal(syscall.SIGTERM)
	done, err := fake.WaitJob(job, 5*time.Second)
	if err != nil || done.ExitCode != 0 || done.Runner != "ghr-1-i-1" || !strings.Contains(done.Output, filepath.Join(work, "repo", "repo")) {
		t.Fatalf("job = %+v %v", done, err)
	}
	if err := run.Wait(); err != nil {
		t.Fatalf("run.sh after SIGTERM: %v", err)
	}
	if _, err := os.Stat(filepath.Join(work, "repo", "repo", "file.txt")); err != nil {
		t.Fatal("the job did not run in the work folder")
	}
	if j, _ := fake.Job(other); j.State != "queued" {
		t.Fatalf("a job of another label ran: %+v", j)
	}

	rm, _, err := gh.RemoveToken(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := sh("./config.sh", "remove", "--token", rm); err != nil {
		t.Fatalf("remove: %v %s", err, out)
	}
	if len(fake.Runners()) != 0 {
		t.Fatal("runner still registered after remove")
	}
	if _, err := os.Stat(filepath.Join(runnerDir, ".runner")); err == nil {
		t.Fatal(".runner left after remove")
	}
	if out, err := sh("./run.sh"); err == nil || !strings.Contains(out, "Not configured") {
		t.Fatalf("run.sh unconfigured: %v %s", err, out)
	}
}
