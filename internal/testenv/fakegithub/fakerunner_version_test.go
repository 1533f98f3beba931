package fakegithub_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	agentrunner "github.com/ghrunner/terraform-provider-ghrunner/agent/runner"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// installAs lays out the rig's runner from the release tarball of version,
// as the agent installs it, and returns the tarball's SHA-256.
func (r *rig) installAs(version string) string {
	r.t.Helper()
	bin, err := fakegithub.BuildRunner()
	if err != nil {
		r.t.Fatal(err)
	}
	tgz, err := fakegithub.RunnerTarballOf(bin, version)
	if err != nil {
		r.t.Fatal(err)
	}
	r.fake.ServeRunnerRelease(version, tgz)
	sum := sha256.Sum256(tgz)
	r.dir = filepath.Join(r.t.TempDir(), "runner")
	url := r.fake.URL() + "/actions/runner/releases/download/v" + version + "/actions-runner-linux-x64-" + version + ".tar.gz"
	if err := agentrunner.Install(context.Background(), r.dir, url, hex.EncodeToString(sum[:])); err != nil {
		r.t.Fatal(err)
	}
	return hex.EncodeToString(sum[:])
}

func TestTheFakeRunnerReportsTheVersionItWasInstalledAs(t *testing.T) {
	r := newRig(t)
	r.installAs("2.337.0")
	if v := agentrunner.Version(context.Background(), r.dir); v != "2.337.0" {
		t.Fatalf("bin/Runner.Listener --version says %q, want 2.337.0", v)
	}
}

func TestTheLatestReleaseIsServedWithTheChecksumsOfItsNotes(t *testing.T) {
	r := newRig(t)
	bin, _ := fakegithub.BuildRunner()
	tgz, _ := fakegithub.RunnerTarballOf(bin, "2.338.0")
	at := time.Now().Add(-time.Hour).Truncate(time.Second)
	r.fake.PublishRunnerRelease("2.337.0", tgz, at.Add(-time.Hour))
	r.fake.PublishRunnerRelease("2.338.0", tgz, at)
	tag, published, body, err := r.gh.LatestRunnerRelease(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := runnerrelease.FromRelease(tag, published, body)
	sum := sha256.Sum256(tgz)
	if err != nil || rel.Version != "2.338.0" || !published.Equal(at) || rel.SHA256["amd64"] != hex.EncodeToString(sum[:]) {
		t.Fatalf("latest release %+v at %v (%v), want 2.338.0 at %v with the tarball's checksum", rel, published, err, at)
	}
}

func TestGitHubRefusesToRegisterARunnerBelowTheMinimumVersion(t *testing.T) {
	r := newRig(t)
	r.installAs("2.336.0")
	r.fake.SetMinimumRunnerVersion("2.337.0")
	out, code := r.configure("too-old", "--disableupdate")
	if code != 1 || !strings.Contains(out, "Your runner version is out of date and can no longer register with GitHub") || !strings.Contains(out, "2.337.0") {
		t.Fatalf("config.sh exited %d:\n%s\nwant exit 1 with GitHub's refusal naming the minimum", code, out)
	}
	r.fake.SetMinimumRunnerVersion("2.336.0")
	if out, code := r.configure("just-new-enough", "--disableupdate"); code != 0 {
		t.Fatalf("at the minimum, config.sh exited %d:\n%s", code, out)
	}
}

func TestARunnerThirtyDaysBehindTheNextReleaseStopsTakingJobsWithRunShsCodes(t *testing.T) {
	r := newRig(t)
	r.installAs("2.336.0")
	if out, code := r.configure("behind", "--disableupdate"); code != 0 {
		t.Fatalf("config.sh: %d\n%s", code, out)
	}
	bin, _ := fakegithub.BuildRunner()
	tgz, _ := fakegithub.RunnerTarballOf(bin, "2.337.0")
	r.fake.PublishRunnerRelease("2.337.0", tgz, time.Now().Add(-29*24*time.Hour))
	r.advance(2 * 24 * time.Hour) // 31 days after the next release
	out, code := r.sh(nil, "run.sh")
	if code != 0 || !strings.Contains(out, "Runner version v2.336.0 is deprecated and cannot receive messages.") ||
		!strings.Contains(out, "Runner listener exit with terminated error") {
		t.Fatalf("run.sh exited %d:\n%s\nwant 0 after the listener's TerminatedError", code, out)
	}
	out, code = r.sh([]string{"ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE=1"}, "run.sh")
	if code != 7 || !strings.Contains(out, "deprecated version exit code: 7") {
		t.Fatalf("with ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE, run.sh exited %d:\n%s\nwant 7", code, out)
	}
}

// A runner behind the latest release that may update is sent one update
// message; it updates itself as the real one does (version.go): the
// listener downloads and checks the package while it goes on polling and
// takes no job meanwhile, exits for the update, run-helper.sh waits for
// update.finished and exits 2, and run.sh launches the updated listener,
// which takes the job queued all along; the root's bin/ is the new
// release's. Each rule shows: a job taken during the update would run on
// 2.336.0; a run.sh that did not launch the listener again would exit (2);
// a listener that did not download the package the message names would
// not update; the server's one message per session, otherwise one per
// poll while the download lasts.
func TestARunnerBehindTheLatestReleaseUpdatesItselfAndRunShLaunchesItAgainUnlessItDisabledUpdates(t *testing.T) {
	r := newRig(t)
	r.installAs("2.336.0")
	bin, _ := fakegithub.BuildRunner()
	tgz, _ := fakegithub.RunnerTarballOf(bin, "2.337.0")
	r.fake.PublishRunnerRelease("2.337.0", tgz, time.Now())
	r.fake.DelayReleaseAssets(1500 * time.Millisecond) // the download lasts several polls
	if out, code := r.configure("may-update", "--labels", "run-u", "--no-default-labels"); code != 0 {
		t.Fatalf("config.sh: %d\n%s", code, out)
	}
	id := r.fake.EnqueueJob("run-u", "echo on the new release")
	p := r.start()
	job, err := r.fake.WaitJob(id, 30*time.Second)
	if err != nil || job.ExitCode != 0 || job.RunnerVersion != "2.337.0" {
		t.Fatalf("the job queued while the runner updated: %+v %v, want it run on 2.337.0\n%s", job, err, p.out.String())
	}
	out := p.out.String()
	for _, line := range []string{"Runner update in progress", "Downloading 2.337.0 runner", "Runner listener exit because of updating",
		"Update finished successfully.", "Restarting runner...", "Current runner version: '2.337.0'"} {
		if !strings.Contains(out, line) {
			t.Errorf("run.sh's output lacks %q:\n%s", line, out)
		}
	}
	if n := r.fake.Count(fakegithub.CountUpdateMessages); n != 1 {
		t.Errorf("%d update messages, want 1 (one per listener session)", n)
	}
	if v := agentrunner.Version(context.Background(), r.dir); v != "2.337.0" {
		t.Errorf("the root's bin/ says %q after the update, want 2.337.0", v)
	}
	select {
	case err := <-p.done:
		t.Fatalf("run.sh ended (%v) after the update instead of listening:\n%s", err, p.out.String())
	default:
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	p.wait(t, 10*time.Second)

	// --disableupdate: listening, no update, until stopped.
	r.installAs("2.336.0")
	if out, code := r.configure("pinned", "--disableupdate"); code != 0 {
		t.Fatalf("config.sh: %d\n%s", code, out)
	}
	p = r.start()
	time.Sleep(1500 * time.Millisecond)
	if n := r.fake.Count(fakegithub.CountUpdateMessages); n != 1 || !strings.Contains(p.out.String(), "Listening for Jobs") {
		t.Fatalf("a runner configured with --disableupdate: %d update messages in all, output:\n%s", n, p.out.String())
	}
}
