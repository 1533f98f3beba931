package state

import (
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
)

func TestAPoolsLatestTargetOutlivesAnApplyOfItsConfiguration(t *testing.T) {
	s, _ := newStore(t)
	p := validPool()
	p.Runner = RunnerSpec{Version: runnerrelease.Latest, Arch: "amd64"}
	must(t, s.PutPoolConfig(ctx, p))
	if got, err := s.GetPoolConfig(ctx, p.Name); err != nil || got.RunnerTarget() != nil {
		t.Fatalf("before refresh learned a release the pool has no target: %+v %v", got, err)
	}
	want := runnerrelease.Target{Version: "2.337.0", URL: runnerrelease.URL("2.337.0", "amd64"), SHA256: strings.Repeat("1", 64)}
	must(t, s.SetLatestTarget(ctx, p.Name, want))
	p.MaxInstances = 7 // an apply rewrites the configuration
	must(t, s.PutPoolConfig(ctx, p))
	got, err := s.GetPoolConfig(ctx, p.Name)
	if err != nil || got.MaxInstances != 7 || got.RunnerTarget() == nil || *got.RunnerTarget() != want {
		t.Fatalf("after the apply: %+v %v", got, err)
	}
	if err := s.SetLatestTarget(ctx, "gone", want); err == nil {
		t.Fatal("a target for a pool that does not exist was written")
	}
}

func TestAPinnedPoolTargetsItsReleaseOrItsMirror(t *testing.T) {
	p := validPool()
	p.Runner = RunnerSpec{Version: runnerrelease.Default, Arch: "arm64"}
	url, sum, _ := runnerrelease.Tarball(runnerrelease.Default, "arm64")
	if got := p.RunnerTarget(); got == nil || got.URL != url || got.SHA256 != sum {
		t.Fatalf("pinned: %+v", got)
	}
	p.Runner = RunnerSpec{Version: "2.340.0", Arch: "amd64", TarballURL: "https://mirror.example/r.tgz", TarballSHA256: strings.Repeat("a", 64)}
	if got := p.RunnerTarget(); got == nil || got.URL != "https://mirror.example/r.tgz" || got.Version != "2.340.0" {
		t.Fatalf("mirror: %+v", got)
	}
	p.Runner = RunnerSpec{}
	if p.RunnerTarget() != nil {
		t.Fatal("a pool without a spec keeps what its user data installs")
	}
}

func TestARunnerSpecIsValidatedNamingItsField(t *testing.T) {
	for want, spec := range map[string]RunnerSpec{
		"runner.arch":          {Version: "latest", Arch: "x86"},
		"runner.tarballUrl":    {Version: "latest", Arch: "amd64", TarballURL: "https://m/r.tgz", TarballSHA256: strings.Repeat("a", 64)},
		"runner.tarballSha256": {Version: "2.340.0", Arch: "amd64", TarballURL: "https://m/r.tgz"},
		"runner_version":       {Version: "2.300.0", Arch: "amd64"},
	} {
		p := validPool()
		p.Runner = spec
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: got %v, want an error naming %s", spec, err, want)
		}
	}
}

func TestAnInstancesRunnerTargetIsTheControlPlanesAndItsVersionTheAgents(t *testing.T) {
	s, _ := newStore(t)
	inst := created(t, s, "i-0target", "run-1")
	target := runnerrelease.Target{Version: "2.337.0", URL: "https://x/r.tgz", SHA256: strings.Repeat("2", 64)}
	got, err := s.SetRunnerTarget(ctx, inst.Key, testPool, target)
	if err != nil || got.RunnerTarget == nil || *got.RunnerTarget != target {
		t.Fatalf("set target: %+v %v", got, err)
	}
	if _, err := s.SetRunnerTarget(ctx, inst.Key, "other-pool", target); ClauseOf(err) != ClausePool {
		t.Fatalf("a target written for another pool's record: %v", err)
	}
	must(t, s.SetRunnerVersion(ctx, inst.Key, "2.336.0"))
	if got, _ := s.Get(ctx, inst.Key); got.RunnerVersion != "2.336.0" {
		t.Fatalf("runnerVersion %q", got.RunnerVersion)
	}
	for _, a := range AgentAttributes {
		if a == "runnerTarget" {
			t.Fatal("an instance could name the release it installs")
		}
	}
}

// A claim writes the pool's runner target into the record it claims (the
// agent starts the run's runner from it), and keeps the record's when it
// names none.
func TestAClaimWritesThePoolsRunnerTarget(t *testing.T) {
	s, _ := newStore(t)
	target := runnerrelease.Target{Version: "2.337.0", URL: "https://x/r.tgz", SHA256: strings.Repeat("2", 64)}
	inst := pooled(t, s, "i-0claimtarget")
	req := claimReq("run-1")
	req.RunnerTarget = &target
	got, err := s.Claim(ctx, inst.Key, req)
	if err != nil || got.RunnerTarget == nil || *got.RunnerTarget != target {
		t.Fatalf("claimed with the pool's target: %+v %v", got, err)
	}
	kept := pooled(t, s, "i-0claimkept")
	if _, err := s.SetRunnerTarget(ctx, kept.Key, testPool, target); err != nil {
		t.Fatal(err)
	}
	got, err = s.Claim(ctx, kept.Key, claimReq("run-2"))
	if err != nil || got.RunnerTarget == nil || *got.RunnerTarget != target {
		t.Fatalf("claimed without a target: the record's %+v should stay (%v)", got, err)
	}
}
