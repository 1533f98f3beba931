package scaledown

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// EC2 is what scale-down asks of EC2 (a *fleet.Fleet).
type EC2 interface {
	List(ctx context.Context, f fleet.Filter) ([]fleet.Instance, error)
	Terminate(ctx context.Context, ids []string) (fleet.TerminateResult, error)
	SetTags(ctx context.Context, ids []string, tags map[string]string) error
	UntagOrphan(ctx context.Context, id string) error
}

// GitHub is what scale-down asks of GitHub (a *github.Client).
type GitHub interface {
	ListRunners(ctx context.Context, owner string) ([]github.Runner, error)
	GetRunner(ctx context.Context, owner string, id int64) (github.Runner, error)
	DeleteRunner(ctx context.Context, owner string, id int64) error
}

// Output is the run's summary: every instance with what happened and why.
type Output struct {
	Kept           []Decision `json:"kept"`
	Terminated     []Decision `json:"terminated"`
	Orphaned       []Decision `json:"orphaned"`
	Untagged       []Decision `json:"untagged"`
	Errors         []string   `json:"errors,omitempty"`
	ElapsedSeconds float64    `json:"elapsedSeconds"`
}

// Handle runs one scale-down. The payload may be empty or {}.
func Handle(ctx context.Context, d *controlplane.Deps, ec2 EC2, gh GitHub, payload json.RawMessage) (*Output, error) {
	start := time.Now()
	if err := controlplane.DecodeNone(payload); err != nil {
		return nil, err
	}
	in, err := gather(ctx, d, ec2, gh)
	if err != nil {
		return nil, err
	}
	out := &Output{Kept: []Decision{}, Terminated: []Decision{}, Orphaned: []Decision{}, Untagged: []Decision{}}
	var terminate []string
	for _, dec := range Decide(in) {
		switch dec.Action {
		case Keep:
			out.Kept = append(out.Kept, dec)
		case Renew:
			out.Kept = append(out.Kept, renew(ctx, d, in, dec, out))
		case Untag:
			if err := ec2.UntagOrphan(ctx, dec.InstanceID); err != nil {
				out.Errors = append(out.Errors, err.Error())
				continue
			}
			out.Untagged = append(out.Untagged, dec)
		case Orphan:
			tags := map[string]string{fleet.TagOrphan: dec.Assignment}
			if rec := in.Records[dec.InstanceID]; rec != nil && rec.GithubRunnerID != 0 {
				tags[fleet.TagGithubRunnerID] = strconv.FormatInt(rec.GithubRunnerID, 10)
			}
			if err := ec2.SetTags(ctx, []string{dec.InstanceID}, tags); err != nil {
				out.Errors = append(out.Errors, err.Error())
				continue
			}
			out.Orphaned = append(out.Orphaned, dec)
		case Terminate:
			if kept, why := retire(ctx, d, gh, in, dec); kept {
				dec.Reason += "; kept: " + why
				out.Kept = append(out.Kept, dec)
				continue
			}
			terminate = append(terminate, dec.InstanceID)
			out.Terminated = append(out.Terminated, dec)
		}
	}
	// One batched call for every termination of the run.
	if len(terminate) > 0 {
		if _, err := ec2.Terminate(ctx, terminate); err != nil {
			out.Errors = append(out.Errors, fmt.Sprintf("terminate: %v (the records are marked; refresh terminates them again)", err))
		}
	}
	out.ElapsedSeconds = time.Since(start).Seconds()
	d.Log.Info("scale-down finished", "kept", len(out.Kept), "terminated", len(out.Terminated), "orphaned", len(out.Orphaned), "untagged", len(out.Untagged), "errors", len(out.Errors))
	return out, nil
}

// gather reads the pools, the live instances, their records and one runner
// listing per owner.
func gather(ctx context.Context, d *controlplane.Deps, ec2 EC2, gh GitHub) (Input, error) {
	in := Input{Now: d.Store.Now(), Pools: map[string]state.PoolConfig{}, Runners: map[string][]github.Runner{}}
	pools, err := d.Store.ListPoolConfigs(ctx)
	if err != nil {
		return in, err
	}
	for _, p := range pools {
		p.Timings = p.Timings.WithDefaults(p.OS)
		in.Pools[p.Name] = p
	}
	if in.Instances, err = ec2.List(ctx, fleet.Filter{}); err != nil {
		return in, err
	}
	ids := make([]string, len(in.Instances))
	owners := map[string]bool{}
	for i, inst := range in.Instances {
		ids[i] = inst.ID
		if _, orphan := inst.Orphan(); !orphan && inst.Tags[fleet.TagOwner] != "" {
			owners[inst.Tags[fleet.TagOwner]] = true
		}
	}
	if in.Records, err = d.Store.GetMany(ctx, ids); err != nil {
		return in, err
	}
	for _, rec := range in.Records {
		owners[rec.Owner] = true
	}
	for owner := range owners {
		runners, err := gh.ListRunners(ctx, owner)
		if err != nil {
			return in, fmt.Errorf("list runners of %s: %w", owner, err)
		}
		in.Runners[owner] = runners
	}
	in.Runner = func(owner string, id int64) (github.Runner, bool, error) {
		r, err := gh.GetRunner(ctx, owner, id)
		if github.IsNotFound(err) {
			return github.Runner{}, false, nil
		}
		return r, err == nil, err
	}
	return in, nil
}

func renew(ctx context.Context, d *controlplane.Deps, in Input, dec Decision, out *Output) Decision {
	rec := in.Records[dec.InstanceID]
	p := in.Pools[dec.Pool]
	if _, err := d.Store.Renew(ctx, rec.Ref(), state.D(p.Timings.IdleTTL)); err != nil {
		dec.Reason += "; lease not renewed: " + err.Error()
	}
	return dec
}

// retire deregisters the runner (re-reading it first) and marks the record
// terminated with a conditional write; it says why when the instance must be
// kept instead.
func retire(ctx context.Context, d *controlplane.Deps, gh GitHub, in Input, dec Decision) (bool, string) {
	if dec.Deregister != 0 {
		r, err := gh.GetRunner(ctx, dec.Owner, dec.Deregister)
		switch {
		case github.IsNotFound(err):
		case err != nil:
			return true, "runner not re-read: " + err.Error()
		case r.Busy && r.Status == "online":
			return true, "its runner is running a job right now"
		default:
			if err := gh.DeleteRunner(ctx, dec.Owner, dec.Deregister); err != nil {
				return true, "deregistration failed: " + err.Error()
			}
		}
	}
	rec := in.Records[dec.InstanceID]
	if rec == nil || rec.State == state.Terminated {
		return false, ""
	}
	assignment := dec.Assignment
	if assignment == "" {
		assignment = rec.Assignment
	}
	if _, err := d.Store.Terminate(ctx, dec.InstanceID, state.Termination{Assignment: assignment, Reason: "scale-down: " + dec.Reason}); err != nil {
		return true, "record changed meanwhile: " + err.Error()
	}
	return false, ""
}
