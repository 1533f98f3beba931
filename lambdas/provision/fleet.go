package provision

import (
	"context"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
)

// FleetLauncher is provision's view of a deployment's fleet.
type FleetLauncher struct{ Fleet *fleet.Fleet }

// launchRequest is spec as the fleet takes it.
func launchRequest(spec LaunchSpec) fleet.LaunchRequest {
	return fleet.LaunchRequest{
		LaunchTemplateID: spec.Pool.LaunchTemplateID, LaunchTemplateVersion: spec.Pool.LaunchTemplateVersion,
		InstanceTypes: spec.Types, SubnetIDs: spec.Pool.SubnetIDs, SubnetZones: spec.Pool.SubnetZones, Count: spec.Count, UsageClass: spec.UsageClass,
		OnDemandFallback: spec.Pool.OnDemandFallback, Pool: spec.Pool.Name, Owner: spec.Owner, Assignment: spec.Assignment,
		Tags: spec.Pool.Tags,
	}
}

func (l FleetLauncher) Launch(ctx context.Context, spec LaunchSpec) ([]Launched, LaunchErrors, error) {
	res, err := l.Fleet.Launch(ctx, launchRequest(spec))
	now := time.Now()
	out := make([]Launched, len(res.Instances))
	for i, inst := range res.Instances {
		out[i] = Launched{ID: inst.InstanceID, InstanceType: inst.InstanceType, UsageClass: inst.UsageClass, LaunchedAt: now}
	}
	why := LaunchErrors{Detail: res.Detail()}
	for _, e := range res.Errors {
		why.Errors = append(why.Errors, LaunchError{Code: e.Code, Message: e.Message, InstanceType: e.InstanceType, SubnetID: e.SubnetID, UsageClass: e.UsageClass})
	}
	return out, why, err
}

func (l FleetLauncher) Running(ctx context.Context, ids []string) (map[string]bool, error) {
	insts, err := l.Fleet.List(ctx, fleet.Filter{IDs: ids, States: []string{"running"}})
	if err != nil {
		return nil, err
	}
	running := make(map[string]bool, len(insts))
	for _, i := range insts {
		running[i.ID] = true
	}
	return running, nil
}

func (l FleetLauncher) Ended(ctx context.Context, ids []string) (map[string]string, error) {
	insts, err := l.Fleet.List(ctx, fleet.Filter{IDs: ids, States: []string{"stopping", "stopped", "shutting-down", "terminated"}})
	if err != nil {
		return nil, err
	}
	ended := make(map[string]string, len(insts))
	for _, i := range insts {
		ended[i.ID] = i.State
		if i.StateReason != "" {
			ended[i.ID] += " (" + i.StateReason + ")"
		}
	}
	return ended, nil
}

func (l FleetLauncher) Live(ctx context.Context, pool string) (map[string]string, error) {
	insts, err := l.Fleet.List(ctx, fleet.Filter{Pool: pool})
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(insts))
	for _, i := range insts {
		out[i.ID] = i.Tags[fleet.TagAssignment]
	}
	return out, nil
}

func (l FleetLauncher) Terminate(ctx context.Context, ids []string) error {
	_, err := l.Fleet.Terminate(ctx, ids)
	return err
}

func (l FleetLauncher) CanLaunch(ctx context.Context, spec LaunchSpec) error {
	return l.Fleet.CanLaunch(ctx, launchRequest(spec))
}

func (l FleetLauncher) CanTerminate(ctx context.Context, id string) error {
	return l.Fleet.CanTerminate(ctx, id)
}

func (l FleetLauncher) Stopped(ctx context.Context, ids []string) (map[string]bool, error) {
	insts, err := l.Fleet.List(ctx, fleet.Filter{IDs: ids, States: []string{"stopped"}})
	if err != nil {
		return nil, err
	}
	stopped := make(map[string]bool, len(insts))
	for _, i := range insts {
		stopped[i.ID] = true
	}
	return stopped, nil
}

func (l FleetLauncher) Start(ctx context.Context, id string) error { return l.Fleet.Start(ctx, id) }
