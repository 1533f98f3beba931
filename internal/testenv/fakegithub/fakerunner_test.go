package fakegithub_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/testbin"
)

// rig is a fake GitHub, a client of it, and a runner directory.
type rig struct {
	t    *testing.T
	fake *fakegithub.Server
	gh   *github.Client
	dir  string // the runner directory (config.sh, run.sh)
	work string
	cwd  string        // where commands are started from: not the runner directory
	skew time.Duration // the fake's clock runs this far ahead of the real one
	mu   sync.Mutex
}

func newRig(t *testing.T) *rig {
	// A listener refused a live session retries 10 times a second here,
	// 300 times as often as the real one: the tests that meet a conflict
	// wait for it to end or for the listener to give up.
	return newRigWith(t, fakegithub.Options{SessionRetry: 100 * time.Millisecond, SessionConflictLimit: 2 * time.Second})
}

// newRigWith is a rig whose fake has the options o (its organization and
// clock are the rig's).
func newRigWith(t *testing.T, o fakegithub.Options) *rig {
	r := &rig{t: t}
	o.Orgs, o.Now = []string{"acme"}, r.clock
	r.fake = fakegithub.NewServer(o)
	t.Cleanup(r.fake.Close)
	var err error
	r.gh, err = github.New(github.Config{BaseURL: r.fake.URL(), AppID: r.fake.AppID, PrivateKeyPEM: r.fake.PrivateKeyPEM})
	if err != nil {
		t.Fatal(err)
	}
	r.dir = fakegithub.NewRunnerDir(t)
	r.work = filepath.Join(t.TempDir(), "work")
	r.cwd = t.TempDir()
	return r
}

func (r *rig) clock() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Now().Add(r.skew)
}

func (r *rig) advance(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.skew += d
}

func (r *rig) regToken() string {
	tok, _, err := r.gh.RegistrationToken(context.Background(), "acme")
	if err != nil {
		r.t.Fatal(err)
	}
	return tok
}

func (r *rig) removeToken() string {
	tok, _, err := r.gh.RemoveToken(context.Background(), "acme")
	if err != nil {
		r.t.Fatal(err)
	}
	return tok
}

// sh runs a runner script from another directory; env adds variables.
func (r *rig) sh(env []string, script string, args ...string) (string, int) {
	r.t.Helper()
	cmd := exec.Command(filepath.Join(r.dir, script), args...)
	cmd.Dir = r.cwd
	cmd.Env = append(os.Environ(), append(env, fakegithub.AllowRoot)...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatal(err)
	}
	return string(out), code
}

func (r *rig) configure(name string, extra ...string) (string, int) {
	args := append([]string{"--unattended", "--url", r.gh.RunnerURL("acme"), "--name", name, "--work", r.work}, extra...)
	return r.sh([]string{"ACTIONS_RUNNER_INPUT_TOKEN=" + r.regToken()}, "config.sh", args...)
}

// runSh starts run.sh in its own process group, as the agent does.
type runSh struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (r *rig) start(args ...string) *runSh {
	r.t.Helper()
	p := &runSh{cmd: exec.Command(filepath.Join(r.dir, "run.sh"), args...), out: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd.Dir = r.cwd
	p.cmd.Env = append(os.Environ(), fakegithub.AllowRoot)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	r.t.Cleanup(func() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	})
	return p
}

func (p *runSh) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case err := <-p.done:
		return err
	case <-time.After(within):
		t.Fatalf("run.sh still running after %v:\n%s", within, p.out.String())
		return nil
	}
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within %v", what, within)
}

func (r *rig) only() fakegithub.RunnerInfo {
	r.t.Helper()
	rs := r.fake.Runners()
	if len(rs) != 1 {
		r.t.Fatalf("runners = %+v, want one", rs)
	}
	return rs[0]
}

func TestFakeRunnerContract(t *testing.T) {
	r := newRig(t)
	url := r.gh.RunnerURL("acme")

	// A bad token: GitHub's 404 from the token exchange, exit 1, nothing written.
	out, code := r.sh(nil, "config.sh", "--unattended", "--url", url, "--token", "nope", "--name", "r1", "--labels", "run-1", "--no-default-labels", "--work", r.work)
	if code != 1 || !strings.Contains(out, "Http response code: NotFound from 'POST "+r.fake.URL()+"/api/v3/actions/runner-registration'") || !strings.Contains(out, "Response status code does not indicate success: 404 (Not Found).") {
		t.Fatalf("bad token: exit %d\n%s", code, out)
	}
	// An expired one, likewise.
	old := r.regToken()
	r.advance(61 * time.Minute)
	out, code = r.sh(nil, "config.sh", "--unattended", "--url", url, "--token", old, "--name", "r1", "--labels", "run-1", "--work", r.work)
	if code != 1 || !strings.Contains(out, "NotFound") {
		t.Fatalf("expired token: exit %d\n%s", code, out)
	}
	r.advance(-61 * time.Minute)
	if _, err := os.Stat(filepath.Join(r.dir, ".runner")); err == nil {
		t.Fatal(".runner written after a refused registration")
	}
	if n := r.fake.Count("POST /actions/runner-registration"); n != 2 {
		t.Fatalf("%d token exchanges, want 2 (a 404 is not retried)", n)
	}

	// Registration, the token in ACTIONS_RUNNER_INPUT_TOKEN as the agent passes it.
	out, code = r.configure("ghr-1-i-1", "--labels", "run-1", "--no-default-labels", "--replace")
	if code != 0 || !strings.Contains(out, "Runner successfully added") || !strings.Contains(out, "Settings Saved.") {
		t.Fatalf("config: exit %d\n%s", code, out)
	}
	raw, err := os.ReadFile(filepath.Join(r.dir, ".runner"))
	if err != nil || !bytes.HasPrefix(raw, []byte("\xef\xbb\xbf")) {
		t.Fatalf(".runner without a byte order mark: %q %v", raw, err)
	}
	var settings struct {
		AgentID    int64  `json:"agentId"`
		AgentName  string `json:"agentName"`
		PoolID     int64  `json:"poolId"`
		ServerURL  string `json:"serverUrl"`
		GitHubURL  string `json:"gitHubUrl"`
		WorkFolder string `json:"workFolder"`
	}
	if err := json.Unmarshal(raw[3:], &settings); err != nil {
		t.Fatal(err)
	}
	reg := r.only()
	if settings.AgentID != reg.ID || settings.AgentName != "ghr-1-i-1" || settings.PoolID != 1 || settings.ServerURL == "" || settings.GitHubURL != url || settings.WorkFolder != r.work {
		t.Fatalf(".runner = %+v, runner %+v", settings, reg)
	}
	if info, err := os.Stat(filepath.Join(r.dir, ".credentials_rsaparams")); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf(".credentials_rsaparams: %v %v", info, err)
	}
	if _, err := os.Stat(filepath.Join(r.dir, ".credentials")); err != nil {
		t.Fatal(err)
	}
	if reg.Name != "ghr-1-i-1" || !slices.Equal(reg.Labels, []string{"run-1"}) || reg.Online || reg.Busy || reg.Owner != "acme" {
		t.Fatalf("runner after config = %+v", reg)
	}
	if out, code := r.configure("ghr-1-i-1", "--labels", "run-1"); code != 1 || !strings.Contains(out, "already configured") {
		t.Fatalf("configuring twice: exit %d\n%s", code, out)
	}

	// run.sh: online, takes only its label's jobs, busy during one, runs
	// it in <work>/repo/repo; a SIGTERM once it is done ends it, exit 0.
	foreign := r.fake.EnqueueJob("run-2", "echo wrong runner")
	job := r.fake.EnqueueJob("run-1", "sleep 1; pwd; echo data > file.txt; echo ws=$GITHUB_WORKSPACE; env | grep -c ACTIONS_RUNNER_INPUT_ || true")
	p := r.start()
	eventually(t, 5*time.Second, "online and busy", func() bool { rs := r.only(); return rs.Online && rs.Busy })
	if j, _ := r.fake.Job(job); j.State != fakegithub.JobRunning || j.Runner != "ghr-1-i-1" {
		t.Fatalf("job while running: %+v", j)
	}
	done, err := r.fake.WaitJob(job, 5*time.Second)
	p.cmd.Process.Signal(syscall.SIGTERM) // run.sh itself, not its group
	jobDir := filepath.Join(r.work, "repo", "repo")
	if err != nil || done.State != fakegithub.JobCompleted || done.ExitCode != 0 || done.Result != "succeeded" || done.Runner != "ghr-1-i-1" || !strings.Contains(done.Output, jobDir+"\n") || !strings.Contains(done.Output, "ws="+jobDir) || !strings.HasSuffix(done.Output, "0\n") {
		t.Fatalf("job = %+v %v", done, err)
	}
	if err := p.wait(t, 5*time.Second); err != nil {
		t.Fatalf("run.sh after SIGTERM: %v\n%s", err, p.out.String())
	}
	for _, want := range []string{"Connected to GitHub", "Listening for Jobs", "Running job:", "completed with result: Succeeded", "Exiting runner..."} {
		if !strings.Contains(p.out.String(), want) {
			t.Fatalf("run.sh output lacks %q:\n%s", want, p.out.String())
		}
	}
	if rs := r.only(); rs.Online || rs.Busy {
		t.Fatalf("runner after run.sh stopped: %+v, want offline and idle", rs)
	}
	if data, err := os.ReadFile(filepath.Join(jobDir, "file.txt")); err != nil || string(data) != "data\n" {
		t.Fatalf("the job did not run in the work folder: %q %v", data, err)
	}
	if j, _ := r.fake.Job(foreign); j.State != fakegithub.JobQueued || j.Runner != "" {
		t.Fatalf("a job of another label was taken: %+v", j)
	}

	// Removal: a registration token is the wrong kind; a remove token works.
	if out, code := r.sh(nil, "config.sh", "remove", "--token", r.regToken()); code != 1 || !strings.Contains(out, "NotFound") {
		t.Fatalf("remove with a registration token: exit %d\n%s", code, out)
	}
	out, code = r.sh([]string{"ACTIONS_RUNNER_INPUT_TOKEN=" + r.removeToken()}, "config.sh", "remove")
	if code != 0 || !strings.Contains(out, "Runner removed successfully") || !strings.Contains(out, "Removed .runner") {
		t.Fatalf("remove: exit %d\n%s", code, out)
	}
	if len(r.fake.Runners()) != 0 {
		t.Fatal("runner still registered after remove")
	}
	for _, f := range []string{".runner", ".credentials", ".credentials_rsaparams"} {
		if _, err := os.Stat(filepath.Join(r.dir, f)); err == nil {
			t.Fatalf("%s left after remove", f)
		}
	}
	// Unconfigured: run.sh says so and, like the real one, exits 0.
	if out, code := r.sh(nil, "run.sh"); code != 0 || !strings.Contains(out, "Not configured. Run config.(sh/cmd) to configure the runner.") || !strings.Contains(out, "Runner listener exit with terminated error") {
		t.Fatalf("run.sh unconfigured: exit %d\n%s", code, out)
	}
	if out, code := r.sh(nil, "config.sh", "remove", "--token", "x"); code != 0 || !strings.Contains(out, "config files are missing") {
		t.Fatalf("remove when not configured: exit %d\n%s", code, out)
	}
	if j, _ := r.fake.Job(foreign); j.State != fakegithub.JobQueued {
		t.Fatalf("the foreign job: %+v", j)
	}
}

func TestFakeRunnerRunsItsJobsOneAtATimeAndStaysOnline(t *testing.T) {
	r := newRig(t)
	r.fake.SetOfflineAfter(400 * time.Millisecond)
	if out, code := r.configure("r1", "--labels", "run-1,extra", "--no-default-labels"); code != 0 {
		t.Fatalf("config: %d\n%s", code, out)
	}
	log := filepath.Join(t.TempDir(), "log")
	script := "echo start >> " + log + "; sleep 0.4; echo end >> " + log
	jobs := []int64{r.fake.EnqueueJob("run-1", script), r.fake.EnqueueJob("RUN-1", script), r.fake.EnqueueJob("extra", "sleep 1.5")}
	unknown := r.fake.EnqueueJob("nobody-has-this", "true")
	p := r.start()
	for _, id := range jobs[:2] {
		if j, err := r.fake.WaitJob(id, 10*time.Second); err != nil || j.ExitCode != 0 {
			t.Fatalf("job %d: %+v %v", id, j, err)
		}
	}
	// The long job outlives OfflineAfter several times: the runner's
	// heartbeats keep it online while it is busy.
	eventually(t, 5*time.Second, "busy with the long job", func() bool { return r.only().Busy })
	time.Sleep(time.Second)
	if rs := r.only(); !rs.Online || !rs.Busy {
		t.Fatalf("during a long job: %+v, want online and busy", rs)
	}
	if j, err := r.fake.WaitJob(jobs[2], 10*time.Second); err != nil || j.ExitCode != 0 {
		t.Fatalf("long job: %+v %v", j, err)
	}
	data, _ := os.ReadFile(log)
	if string(data) != "start\nend\nstart\nend\n" {
		t.Fatalf("jobs overlapped: %q", data)
	}
	if j, _ := r.fake.Job(unknown); j.State != fakegithub.JobQueued {
		t.Fatalf("a job for a label no runner has: %+v, want queued", j)
	}
	if rs := r.only(); !rs.Online || rs.Busy {
		t.Fatalf("idle runner: %+v", rs)
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	if err := p.wait(t, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if j, _ := r.fake.Job(unknown); j.State != fakegithub.JobQueued {
		t.Fatalf("unknown-label job after the runner left: %+v", j)
	}
	// A failing job reports its exit code.
	p = r.start()
	if j, err := r.fake.WaitJob(r.fake.EnqueueJob("run-1", "echo oops; exit 3"), 5*time.Second); err != nil || j.ExitCode != 3 || j.Result != "failed" || j.Output != "oops\n" {
		t.Fatalf("failing job: %+v %v", j, err)
	}
	// A SIGINT to run.sh's whole process group, as the agent stops it,
	// cancels the job, as the real runner's stop does; its post step
	// still runs, then the listener exits. Busy on the server means the
	// job was handed over, not that its process started: wait for the
	// script itself (a loaded machine can take a while between the two).
	started := filepath.Join(t.TempDir(), "started")
	last := r.fake.EnqueueJobWithPost("run-1", "touch "+started+"; sleep 30; echo finished", "echo post step ran")
	eventually(t, 5*time.Second, "last job running", func() bool { _, err := os.Stat(started); return err == nil })
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT)
	if j, err := r.fake.WaitJob(last, 8*time.Second); err != nil || j.Result != "cancelled" || strings.Contains(j.Output, "finished") ||
		!strings.Contains(j.Output, "The runner has received a shutdown signal") || !strings.HasSuffix(j.Output, "post step ran\n") {
		t.Fatalf("job during a group SIGINT: %+v %v, want it cancelled and its post step run", j, err)
	}
	if err := p.wait(t, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestShutdownCancelsTheJobLikeTheRealRunner(t *testing.T) {
	r := newRig(t)
	if out, code := r.configure("r1", "--labels", "run-1", "--no-default-labels"); code != 0 {
		t.Fatalf("config: %d\n%s", code, out)
	}
	job := r.fake.EnqueueJob("run-1", "echo started; sleep 30")
	p := r.start()
	eventually(t, 5*time.Second, "job running", func() bool { j, _ := r.fake.Job(job); return strings.Contains(j.State, "running") && r.only().Busy })
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT)
	if err := p.wait(t, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	j, err := r.fake.WaitJob(job, time.Second)
	if err != nil || j.Result != "cancelled" || !strings.Contains(j.Output, "The runner has received a shutdown signal") || time.Since(start) > 8*time.Second {
		t.Fatalf("cancelled job: %+v %v after %v", j, err, time.Since(start))
	}
}

func TestRunShEndsWhenTheRegistrationIsDeleted(t *testing.T) {
	r := newRig(t)
	if out, code := r.configure("r1", "--labels", "run-1", "--no-default-labels"); code != 0 {
		t.Fatalf("config: %d\n%s", code, out)
	}
	p := r.start()
	eventually(t, 5*time.Second, "online", func() bool { return r.only().Online })
	if err := r.gh.DeleteRunner(context.Background(), "acme", r.only().ID); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t, 5*time.Second); err != nil {
		t.Fatalf("run.sh: %v", err)
	}
	if !strings.Contains(p.out.String(), "The runner no longer exists on the server. Cleaning up local configuration.") {
		t.Fatalf("run.sh output:\n%s", p.out.String())
	}
	// The history keeps the registration with its labels and its end.
	h := r.fake.History()
	if len(h) != 1 || h[0].Name != "r1" || !slices.Equal(h[0].Labels, []string{"run-1"}) || h[0].From.IsZero() || h[0].To.Before(h[0].From) || h[0].To.IsZero() {
		t.Fatalf("history: %+v", h)
	}
	// The listener deleted its local configuration (Runner.cs since
	// actions/runner #4551): started again, it is not configured.
	out, code := r.sh(nil, "run.sh")
	if code != 0 || !strings.Contains(out, "Not configured. Run config.(sh/cmd) to configure the runner.") {
		t.Fatalf("run.sh of a deleted runner: exit %d\n%s", code, out)
	}
}

func TestRestartedListenerSettlesItsJob(t *testing.T) {
	r := newRig(t)
	if out, code := r.configure("r1", "--labels", "run-1", "--no-default-labels"); code != 0 {
		t.Fatalf("config: %d\n%s", code, out)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	job := r.fake.EnqueueJob("run-1", "echo $$ > "+pidFile+"; sleep 30")
	p := r.start()
	eventually(t, 5*time.Second, "job started", func() bool { _, err := os.Stat(pidFile); return err == nil })
	p.cmd.Process.Kill() // the listener dies; its job's shell lives on
	p.wait(t, 5*time.Second)
	t.Cleanup(func() {
		if raw, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	if rs := r.only(); !rs.Busy {
		t.Fatalf("runner right after its listener died: %+v, want still busy", rs)
	}
	// GitHub holds the dead listener's session until it notices the
	// silence: a new listener retries until then.
	r.advance(10 * time.Second)
	r.start()
	j, err := r.fake.WaitJob(job, 5*time.Second)
	if err != nil || j.State != fakegithub.JobFailed || !strings.Contains(j.Output, "lost communication") {
		t.Fatalf("job of the dead listener: %+v %v", j, err)
	}
	eventually(t, 5*time.Second, "idle again", func() bool { rs := r.only(); return rs.Online && !rs.Busy })
	if j, err := r.fake.WaitJob(r.fake.EnqueueJob("run-1", "true"), 5*time.Second); err != nil || j.ExitCode != 0 {
		t.Fatalf("next job: %+v %v", j, err)
	}
}

func TestConfigureOptions(t *testing.T) {
	r := newRig(t)
	r.fake.AddRunnerGroup("acme", "ci")
	if out, code := r.configure("r1", "--no-default-labels"); code != 1 || !strings.Contains(out, "--no-default-labels without specifying --labels is not supported") {
		t.Fatalf("no labels at all: exit %d\n%s", code, out)
	}
	if out, code := r.configure("r1", "--runnergroup", "nope"); code != 1 || !strings.Contains(out, `Could not find any self-hosted runner group named "nope".`) {
		t.Fatalf("unknown group: exit %d\n%s", code, out)
	}
	out, code := r.configure("r1", "--labels", "a,b,A", "--runnergroup", "ci", "--bogus")
	if code != 0 || !strings.Contains(out, "Unrecognized command-line input arguments for command configure: 'bogus'") {
		t.Fatalf("default labels: exit %d\n%s", code, out)
	}
	first := r.only()
	if !slices.Equal(first.Labels, []string{"self-hosted", "Linux", first.Labels[2], "a", "b"}) || first.Group != "ci" {
		t.Fatalf("runner %+v", first)
	}
	// The local files go (as the agent's Forget does); the name stays taken.
	for _, f := range []string{".runner", ".credentials", ".credentials_rsaparams"} {
		os.Remove(filepath.Join(r.dir, f))
	}
	if out, code := r.configure("r1", "--labels", "c"); code != 1 || !strings.Contains(out, "A runner exists with the same name r1.") {
		t.Fatalf("same name without --replace: exit %d\n%s", code, out)
	}
	out, code = r.configure("R1", "--labels", "c", "--no-default-labels", "--replace")
	if code != 0 || !strings.Contains(out, "Successfully replaced the runner") {
		t.Fatalf("--replace: exit %d\n%s", code, out)
	}
	if again := r.only(); again.ID != first.ID || !slices.Equal(again.Labels, []string{"c"}) {
		t.Fatalf("replaced runner %+v, want id %d with labels [c]", again, first.ID)
	}
	// Missing values end an unattended configuration.
	os.Remove(filepath.Join(r.dir, ".runner"))
	if out, code := r.sh(nil, "config.sh", "--unattended", "--url", r.gh.RunnerURL("acme")); code != 1 || !strings.Contains(out, "Invalid configuration provided for token. Terminating unattended configuration.") {
		t.Fatalf("no token: exit %d\n%s", code, out)
	}
}

func TestFakeRunnerRidesOutProtocolFaults(t *testing.T) {
	r := newRig(t)
	if out, code := r.configure("r1", "--labels", "run-1", "--no-default-labels"); code != 0 {
		t.Fatalf("config: %d\n%s", code, out)
	}
	// The token exchange is retried on a 5xx, as the real config.sh does.
	os.Remove(filepath.Join(r.dir, ".runner"))
	r.fake.Inject(fakegithub.Fault{Path: "/actions/runner-registration", Count: 1, Status: 502})
	if out, code := r.configure("r2", "--labels", "run-2", "--no-default-labels"); code != 0 || !strings.Contains(out, "BadGateway") {
		t.Fatalf("config after a 502: exit %d\n%s", code, out)
	}
	// Polls, job acknowledgements and results that fail are retried.
	r.fake.Inject(fakegithub.Fault{Path: "/_fake/runners/", Count: 1, Status: 500})
	r.fake.Inject(fakegithub.Fault{Path: "/_fake/jobs/", Count: 3, Status: 503})
	p := r.start()
	j, err := r.fake.WaitJob(r.fake.EnqueueJob("run-2", "echo ok"), 10*time.Second)
	if err != nil || j.State != fakegithub.JobCompleted || j.Output != "ok\n" {
		t.Fatalf("job through faults: %+v %v", j, err)
	}
	if n := r.fake.Count("POST /_fake/jobs/{id}/start") + r.fake.Count("POST /_fake/jobs/{id}/complete"); n != 5 {
		t.Fatalf("%d start/complete requests, want 5 (3 failed)", n)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// What the real runner does that a gentler fake would hide (issue 16), each
// mirrored from actions/runner: config.sh refuses root without
// RUNNER_ALLOW_RUNASROOT (src/Misc/layoutroot/config.sh); env.sh writes .env
// and .path (src/Misc/layoutroot/env.sh); the listener loads .env into every
// job's environment (src/Runner.Listener/Program.cs, LoadAndSetEnv); it
// keeps _migrated copies of its settings; removing a busy runner fails.
func TestFakeRunnerIsAsStrictAsTheRealOne(t *testing.T) {
	r := newRig(t)
	asRoot := exec.Command(filepath.Join(r.dir, "config.sh"), "--unattended")
	asRoot.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "RUNNER_ALLOW_RUNASROOT=") })
	if out, err := asRoot.CombinedOutput(); os.Getuid() == 0 && (err == nil || !strings.Contains(string(out), "Must not run with sudo")) {
		t.Fatalf("config.sh as root without RUNNER_ALLOW_RUNASROOT: %v\n%s", err, out)
	}
	if out, code := r.configure("r1", "--labels", "run-1", "--no-default-labels"); code != 0 {
		t.Fatalf("config: %d\n%s", code, out)
	}
	for _, f := range []string{".env", ".path"} {
		if _, err := os.Stat(filepath.Join(r.dir, f)); err != nil {
			t.Fatalf("config.sh wrote no %s: %v", f, err)
		}
	}
	env, err := os.OpenFile(filepath.Join(r.dir, ".env"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(env, "GHR_PLANTED=from-dot-env")
	env.Close()

	p := r.start()
	if j, err := r.fake.WaitJob(r.fake.EnqueueJob("run-1", "echo $GHR_PLANTED"), 5*time.Second); err != nil || j.Output != "from-dot-env\n" {
		t.Fatalf("a job's environment lacks what .env sets: %+v %v", j, err)
	}
	for _, f := range []string{".runner_migrated", ".credentials_migrated"} {
		if _, err := os.Stat(filepath.Join(r.dir, f)); err != nil {
			t.Fatalf("the listener kept no %s: %v", f, err)
		}
	}
	busy := r.fake.EnqueueJob("run-1", "sleep 30")
	eventually(t, 5*time.Second, "busy", func() bool { return r.only().Busy })
	if out, code := r.sh([]string{"ACTIONS_RUNNER_INPUT_TOKEN=" + r.removeToken()}, "config.sh", "remove"); code == 0 || !strings.Contains(out, "still running a job") {
		t.Fatalf("config.sh remove of a busy runner: exit %d\n%s", code, out)
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT)
	if err := p.wait(t, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if j, _ := r.fake.WaitJob(busy, 5*time.Second); j.Result != "cancelled" {
		t.Fatalf("the busy job after a stop: %+v", j)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}
