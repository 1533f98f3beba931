package fakegithub_test

import (
	"context"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

func TestARunnerGroupAdmitsWhatItsAccessSays(t *testing.T) {
	deploy := "acme/app/.github/workflows/deploy.yml@refs/heads/main"
	cases := []struct {
		name     string
		access   fakegithub.GroupAccess
		repo     string
		public   bool
		workflow string
		want     bool
	}{
		{"the default access admits a private repository", fakegithub.GroupAccess{Visibility: "all"}, "app", false, "", true},
		{"the default access refuses a public repository", fakegithub.GroupAccess{Visibility: "all"}, "site", true, "", false},
		{"a group that allows public repositories admits one", fakegithub.GroupAccess{Visibility: "all", AllowsPublicRepositories: true}, "site", true, "", true},
		{"a private-only group refuses a public repository even when it allows them", fakegithub.GroupAccess{Visibility: "private", AllowsPublicRepositories: true}, "site", true, "", false},
		{"a selected group admits a listed repository", fakegithub.GroupAccess{Visibility: "selected", Repositories: []string{"App"}}, "app", false, "", true},
		{"a selected group refuses an unlisted one", fakegithub.GroupAccess{Visibility: "selected", Repositories: []string{"app"}}, "web", false, "", false},
		{"a group restricted to workflows admits a selected one named by its short ref",
			fakegithub.GroupAccess{Visibility: "all", RestrictedToWorkflows: true, SelectedWorkflows: []string{"acme/app/.github/workflows/deploy.yml@main"}}, "app", false, deploy, true},
		{"a group restricted to workflows refuses another workflow",
			fakegithub.GroupAccess{Visibility: "all", RestrictedToWorkflows: true, SelectedWorkflows: []string{"acme/app/.github/workflows/deploy.yml@main"}}, "app", false, "acme/app/.github/workflows/ci.yml@refs/heads/main", false},
		{"a group restricted to workflows refuses another ref of the workflow",
			fakegithub.GroupAccess{Visibility: "all", RestrictedToWorkflows: true, SelectedWorkflows: []string{"acme/app/.github/workflows/deploy.yml@main"}}, "app", false, "acme/app/.github/workflows/deploy.yml@refs/heads/dev", false},
		{"workflows selected but not restricted to are ignored",
			fakegithub.GroupAccess{Visibility: "all", SelectedWorkflows: []string{"acme/app/.github/workflows/deploy.yml@main"}}, "app", false, "acme/app/.github/workflows/ci.yml@main", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.access.Admits(c.repo, c.public, c.workflow); got != c.want {
				t.Fatalf("Admits(%q, public %v, %q) = %v, want %v", c.repo, c.public, c.workflow, got, c.want)
			}
		})
	}
}

// stillQueued asserts that a job is queued after the runners polled a
// few times (a poll waits at most a second).
func stillQueued(t *testing.T, fake *fakegithub.Server, id int64, why string) {
	t.Helper()
	time.Sleep(1500 * time.Millisecond)
	if job, _ := fake.Job(id); job.State != fakegithub.JobQueued {
		t.Fatalf("%s: the job was taken: %+v", why, job)
	}
}

// TestAJobOfAPublicRepositoryNeverReachesADefaultGroupRunner: the Default
// group, as GitHub makes it, admits every repository of the organization
// but no public one. A job of a private repository with the runner's label
// runs; the public repository's job, same label, stays queued until the
// group allows public repositories. (Without the group rule in mayTake the
// public job runs at once and this fails.)
func TestAJobOfAPublicRepositoryNeverReachesADefaultGroupRunner(t *testing.T) {
	r := newRig(t)
	r.fake.SetRepositoryVisibility("acme/site", "public")
	if out, code := r.configure("default-1", "--labels", "build", "--no-default-labels"); code != 0 {
		t.Fatalf("config.sh: exit %d\n%s", code, out)
	}
	r.start()
	public := r.fake.EnqueueJobFrom(fakegithub.JobFrom{Repo: "acme/site"}, "build", "echo public")
	private := r.fake.EnqueueJobFrom(fakegithub.JobFrom{Repo: "acme/app"}, "build", "echo private")
	if job, err := r.fake.WaitJob(private, 20*time.Second); err != nil || job.Result != "succeeded" {
		t.Fatalf("the private repository's job: %+v %v", job, err)
	}
	stillQueued(t, r.fake, public, "a public repository's job reached a runner of the Default group")

	r.fake.SetRunnerGroupAccess("acme", "Default", fakegithub.GroupAccess{Visibility: "all", AllowsPublicRepositories: true})
	if job, err := r.fake.WaitJob(public, 20*time.Second); err != nil || job.Result != "succeeded" {
		t.Fatalf("once the group allows public repositories: %+v %v", job, err)
	}
}

// TestARunnerOfASelectedGroupTakesOnlyItsRepositoriesAndWorkflowsJobs:
// group ci admits repository app alone, and only its deploy workflow. A
// job of web and a job of app's ci workflow stay queued; app's deploy job
// runs. (Without the group rule in mayTake the first job runs.)
func TestARunnerOfASelectedGroupTakesOnlyItsRepositoriesAndWorkflowsJobs(t *testing.T) {
	r := newRig(t)
	r.fake.AddRunnerGroup("acme", "ci")
	r.fake.SetRunnerGroupAccess("acme", "ci", fakegithub.GroupAccess{Visibility: "selected", Repositories: []string{"app"},
		RestrictedToWorkflows: true, SelectedWorkflows: []string{"acme/app/.github/workflows/deploy.yml@main"}})
	if out, code := r.configure("ci-1", "--labels", "build", "--no-default-labels", "--runnergroup", "ci"); code != 0 {
		t.Fatalf("config.sh: exit %d\n%s", code, out)
	}
	r.start()
	web := r.fake.EnqueueJobFrom(fakegithub.JobFrom{Repo: "acme/web", Workflow: "acme/web/.github/workflows/deploy.yml@refs/heads/main"}, "build", "echo web")
	ci := r.fake.EnqueueJobFrom(fakegithub.JobFrom{Repo: "acme/app"}, "build", "echo ci")
	stillQueued(t, r.fake, web, "a repository the group does not list")
	stillQueued(t, r.fake, ci, "a workflow the group is not restricted to")
	deploy := r.fake.EnqueueJobFrom(fakegithub.JobFrom{Repo: "acme/app", Workflow: "acme/app/.github/workflows/deploy.yml@refs/heads/main"}, "build", "echo deploy")
	if job, err := r.fake.WaitJob(deploy, 20*time.Second); err != nil || job.Result != "succeeded" {
		t.Fatalf("the selected repository's selected workflow: %+v %v", job, err)
	}
}

// TestAScaleSetHearsOnlyOfJobsItsGroupAdmits: a scale set in the Default
// group is told of a private repository's job and not of a public one's,
// which stays queued for no scale set. (Without the group rule in
// routeToScaleSet the public job is announced and this fails.)
func TestAScaleSetHearsOnlyOfJobsItsGroupAdmits(t *testing.T) {
	fake := newScaleSetFake(t, fakegithub.ScaleSetOptions{})
	c := newScaleSetClient(t, fake, "acme")
	ctx := context.Background()
	set := createScaleSet(t, c, "ssa", false)
	fake.SetRepositoryVisibility("acme/site", "public")
	public := fake.EnqueueJobFrom(fakegithub.JobFrom{Repo: "acme/site"}, "ssa", "echo public")
	private := fake.EnqueueJobFrom(fakegithub.JobFrom{Repo: "acme/app"}, "ssa", "echo private")
	named := fake.EnqueueScaleSetJob("acme", "site", "ssa", "echo named")
	for id, want := range map[int64]int{public: 0, private: set.ID, named: 0} {
		if job, _ := fake.Job(id); job.ScaleSetID != want || job.State != fakegithub.JobQueued {
			t.Errorf("job %d (%s/%s): scale set %d, %s; want scale set %d, queued", id, job.Owner, job.Repo, job.ScaleSetID, job.State, want)
		}
	}
	session, err := c.MessageSessionClient(ctx, set.ID, "listener")
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close(ctx)
	msg, err := session.GetMessage(ctx, 0, 10)
	if err != nil || msg == nil {
		t.Fatalf("the session's first message: %+v %v", msg, err)
	}
	var told []int64
	for _, m := range msg.JobAvailableMessages {
		told = append(told, m.RunnerRequestID)
	}
	if len(told) != 1 || told[0] != private {
		t.Fatalf("the scale set was told of jobs %v, want only the private repository's %d", told, private)
	}
}
