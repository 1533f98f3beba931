package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/idtoken"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/pool"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
)

// oneCaller verifies every token as a job of workflow run 100 of acme/app.
type oneCaller struct{}

func (oneCaller) Verify(context.Context, string) (idtoken.Identity, error) {
	return idtoken.Identity{RepositoryID: "1", Repository: ownRepo, RunID: "100", RunAttempt: "1", JTI: "jti-" + state.NewAssignment(), Expiry: time.Now().Add(time.Hour)}, nil
}

// A just-in-time instance's first runner may exit before provision marks
// the instance running (an update, a restart of its agent); the agent then
// asks for another, and the stream consumer mints runner 2 into the
// record. If provision then gives the instance up, it must withdraw runner
// 2 as well as runner 1: left registered with the run's label, runner 2
// would take the run's jobs on an instance handed back to the pool. Played
// in-process here: provision claims a pooled instance, a stand-in agent
// gets runner 2 minted (controlplane.MintJIT, as the consumer does) and
// signals UD_REG_FAILED, and confirms it is clean once unclaimed.
//
// With giveUp withdrawing runner 1 by name alone (before withdraw), the
// test failed with: "runners of the given-up instance still registered:
// [ghr-2-2-i-045a8c1249b962e5b]".
func TestAGivenUpInstanceKeepsNoRunnerMintedForItsClaim(t *testing.T) {
	id, store, key, perr := giveUpWithASecondRunner(t, false)
	var left []string
	for _, rn := range store.fake.Runners() {
		if strings.HasSuffix(rn.Name, id) {
			left = append(left, rn.Name)
		}
	}
	if len(left) > 0 {
		t.Fatalf("runners of the given-up instance still registered: %v (provision: %v)", left, perr)
	}
	rec, err := store.Get(ctx, key)
	must(t, err)
	if rec.State != state.Idle || rec.RunID == "100" {
		t.Errorf("given-up instance: %s for %q, want idle", rec.State, rec.RunID)
	}
}

// The same with runner 2 running a job of the run when provision gives the
// instance up: the job is the run's, so the instance is adopted as running
// (keepBusy), as when runner 1 is the busy one. With runner 1 withdrawn
// alone, it failed with: "given-up instance whose runner 2 runs a job:
// idle for "", want running for 100": unclaimed under the job.
func TestAGivenUpInstanceWhoseSecondRunnerRunsAJobIsAdopted(t *testing.T) {
	_, store, key, perr := giveUpWithASecondRunner(t, true)
	rec, err := store.Get(ctx, key)
	must(t, err)
	if rec.State != state.Running || rec.RunID != "100" {
		t.Fatalf("given-up instance whose runner 2 runs a job: %s for %q, want running for 100 (provision: %v)", rec.State, rec.RunID, perr)
	}
}

// giveUpStore is the table with the fake GitHub behind it.
type giveUpStore struct {
	*state.Store
	fake *fakegithub.Server
}

// giveUpWithASecondRunner provisions run 100 onto a pooled just-in-time
// instance whose stand-in agent gets runner 2 minted (busy at GitHub or
// not) and fails its registration. It returns the instance's id, the
// table, the record's key and provision's error.
func giveUpWithASecondRunner(t *testing.T, busy bool) (string, giveUpStore, state.Key, error) {
	cfg := env.Config(t)
	name := awstest.Name(t, "giveup")
	fake := fakegithub.New("acme")
	t.Cleanup(fake.Close)
	db := cfg.DynamoDB()
	must(t, state.CreateTable(ctx, db, name, state.TableOptions{}))
	store := state.New(db, name)
	q, err := cfg.SQS().CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	must(t, err)
	p := state.PoolConfig{Name: "linux", Owner: "acme", QueueURL: aws.ToString(q.QueueUrl), LaunchTemplateID: "lt-0123456789abcdef0",
		LaunchTemplateVersion: "1", InstanceTypes: []string{"c7i.large"}, SubnetIDs: []string{"subnet-0123456789abcdef0"}, UsageClass: "on-demand", MaxInstances: 1,
		InstanceRoleID: "AROAGIVEUPTESTPOOL001", Registration: state.RegistrationJIT,
		// A boot no longer fits after the failure: no replacement, the
		// provision fails and gives back what it holds.
		Timings: state.Timings{CreatedTTL: 60, ClaimTTL: 30, MaxRuntime: 600, IdleTTL: 300, BootTime: 600, HeartbeatInterval: 1, StaleAfter: 10}}
	must(t, store.PutPoolConfig(ctx, p))
	gh, err := github.New(github.Config{BaseURL: fake.URL(), AppID: fake.AppID, PrivateKeyPEM: fake.PrivateKeyPEM})
	must(t, err)
	d := &controlplane.Deps{Store: store, SQS: cfg.SQS(), GitHub: gh, Log: slog.New(slog.NewJSONHandler(io.Discard, nil)), IDTokens: oneCaller{}, Poll: 100 * time.Millisecond}

	// A clean idle instance in the pool, its message in the queue.
	ec := cfg.EC2()
	tags := []ec2types.Tag{{Key: aws.String(fleet.TagEnvironment), Value: aws.String(name)}, {Key: aws.String(fleet.TagPool), Value: aws.String("linux")}, {Key: aws.String(fleet.TagOwner), Value: aws.String("acme")}}
	run, err := ec.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(env.Network(t).AMI), MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: ec2types.InstanceTypeC7iLarge,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags}}})
	must(t, err)
	id := aws.ToString(run.Instances[0].InstanceId)
	inst, err := store.Create(ctx, state.NewInstance{ID: id, RoleID: p.InstanceRoleID, Pool: "linux", Owner: "acme", RunID: "seed", Assignment: state.NewAssignment(),
		InstanceType: "c7i.large", UsageClass: "on-demand", LaunchTemplateVersion: "1", LaunchedAt: time.Now(), TTL: time.Minute})
	must(t, err)
	must(t, store.PutSignal(ctx, inst.Key, inst.Assignment, state.SignalRegOK, ""))
	inst, err = store.MarkRunning(ctx, inst.Ref(), 10*time.Minute, time.Hour)
	must(t, err)
	inst, err = store.Release(ctx, inst.Ref(), "seed", 5*time.Minute, nil)
	must(t, err)
	must(t, store.PutSignal(ctx, inst.Key, inst.Assignment, state.SignalRemoveRegOK, ""))
	must(t, d.Queue(&p).Send(ctx, pool.Message{InstanceID: id, Pool: "linux", InstanceType: "c7i.large", UsageClass: "on-demand", IdleUntil: inst.Threshold}))
	inst, err = store.MarkPooled(ctx, inst.Ref())
	must(t, err)

	// The stand-in agent.
	agentDone := make(chan error, 1)
	go func() { agentDone <- standInAgent(d, fake, inst.Key, busy) }()

	payload, _ := json.Marshal(map[string]any{"runId": "100", "pool": "linux", "timeoutSeconds": 60, "idToken": "token"})
	out, perr := provision.Handle(ctx, provision.Deps{Deps: d, EC2: provision.FleetLauncher{Fleet: fleet.New(ec, name)}}, payload)
	if perr == nil {
		t.Fatalf("provision succeeded although its instance failed to register: %+v", out)
	}
	if err := <-agentDone; err != nil {
		t.Fatalf("stand-in agent: %v (provision: %v)", err, perr)
	}
	return id, giveUpStore{store, fake}, inst.Key, perr
}

// standInAgent plays the agent of a claimed just-in-time instance whose
// first runner exited before provision marked it running: once its first
// configuration is written, it gets a second minted (as the stream
// consumer does on UD_JIT_NEXT; busy: GitHub shows it running a job),
// then fails its registration; unclaimed, it says it is clean.
func standInAgent(d *controlplane.Deps, fake *fakegithub.Server, key state.Key, busy bool) error {
	wait := func(what string, ok func(*state.Instance) bool) (*state.Instance, error) {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			rec, err := d.Store.Get(ctx, key)
			if err == nil && ok(rec) {
				return rec, nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		return nil, &waitError{what}
	}
	rec, err := wait("its first runner", func(r *state.Instance) bool { return r.State == state.Claimed && r.JITSeq == 1 })
	if err != nil {
		return err
	}
	claimed := rec.Assignment
	second, err := d.MintJIT(ctx, rec, 2, rec.Registration.Labels, 1)
	if err != nil {
		return err
	}
	fake.SetBusy(second.Registration.RunnerID, busy)
	if err := d.Store.PutSignal(ctx, key, claimed, state.SignalRegFailed, "runner 2 did not start"); err != nil {
		return err
	}
	if busy {
		return nil // adopted: it runs the job
	}
	rec, err = wait("its unclaim", func(r *state.Instance) bool { return r.State == state.Idle && r.Assignment != claimed })
	if err != nil {
		return err
	}
	return d.Store.PutSignal(ctx, key, rec.Assignment, state.SignalRemoveRegOK, "")
}

type waitError struct{ what string }

func (e *waitError) Error() string { return "waited 30 s for " + e.what }
