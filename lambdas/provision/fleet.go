package provision

import (
	"context"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/pool"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Launcher is the EC2 side of provision.
type Launcher interface {
	// Launch starts count instances of the pool with one fleet request and
	// tags them (pool, owner, assignment). It may return fewer than asked,
	// with EC2's errors saying why.
	Launch(ctx context.Context, spec LaunchSpec) (launched []Launched, why LaunchErrors, err error)
	// Running reports which of ids are in the EC2 state running.
	Running(ctx context.Context, ids []string) (map[string]bool, error)
	// Ended reports which of ids EC2 has stopped or terminated (or is
	// stopping or terminating), with EC2's reason.
	Ended(ctx context.Context, ids []string) (map[string]string, error)
	// Live lists the pool's instances EC2 has not terminated, with their
	// ghr:assignment tag: what counts against maxInstances whatever the
	// records say (a provision killed before its records, a record
	// terminated before its instance).
	Live(ctx context.Context, pool string) (map[string]string, error)
	// Terminate terminates instances; ones already gone are no error.
	Terminate(ctx context.Context, ids []string) error
	// CanLaunch, CanTerminate and CanStart ask EC2, with DryRun, whether
	// a launch of spec and the termination and the start of id would be
	// allowed (nil: yes).
	CanLaunch(ctx context.Context, spec LaunchSpec) error
	CanTerminate(ctx context.Context, id string) error
	CanStart(ctx context.Context, id string) error
	// Stopped reports which of ids EC2 shows stopped (not stopping): the
	// only ones a start may take (start.go).
	Stopped(ctx context.Context, ids []string) (map[string]bool, error)
	// Start starts one stopped instance.
	Start(ctx context.Context, id string) error
}

// LaunchSpec is one fleet request.
type LaunchSpec struct {
	Pool       *state.PoolConfig
	Types      []string
	UsageClass string
	Count      int
	Owner      string
	Assignment string
}

// Launched is one instance EC2 started.
type Launched struct {
	ID           string
	InstanceType string
	UsageClass   string
	LaunchedAt   time.Time
}

const (
	defaultTimeout = 10 * time.Minute
	maxTimeout     = 15 * time.Minute
	minTimeout     = 30 * time.Second
	// maxWait bounds waitSeconds: well below the idle time after which
	// NAT gateways (350 s) and load balancers drop a connection.
	maxWait = 300 * time.Second
)

// request is a validated Input with its defaults filled in.
type request struct {
	Input
	count   int
	min     int // minInstanceCount
	timeout time.Duration
	types   []string
	matcher pool.Matcher
	pool    *state.PoolConfig
}

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

func (l FleetLauncher) CanStart(ctx context.Context, id string) error {
	return l.Fleet.CanStart(ctx, id)
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
