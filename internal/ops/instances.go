package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// ghrunner instances: the live records of a pool or a state, shown
// without their GitHub material.

// InstanceView is what ops shows of a record: everything but the GitHub
// material (a registration token, a just-in-time configuration), of which
// it names the purpose only.
type InstanceView struct {
	ID           string      `json:"instanceId"`
	Pool         string      `json:"pool"`
	Owner        string      `json:"owner"`
	State        state.State `json:"state"`
	RunID        string      `json:"runId,omitempty"`
	Assignment   string      `json:"assignment"`
	InstanceType string      `json:"instanceType"`
	UsageClass   string      `json:"usageClass"`
	Uses         int         `json:"uses"`
	LaunchedAt   int64       `json:"launchedAt"`
	PooledAt     int64       `json:"pooledAt,omitempty"`
	LeaseUntil   int64       `json:"leaseUntil,omitempty"`
	HeartbeatAt  int64       `json:"heartbeatAt,omitempty"`
	Heartbeats   int64       `json:"heartbeats"`
	RunnerName   string      `json:"runnerName,omitempty"`
	RunnerID     int64       `json:"githubRunnerId,omitempty"`
	JITSeq       int         `json:"jitSeq,omitempty"`
	// JITRefused is the last just-in-time request the control plane
	// refused by what it would cost (any assignment: its own is in it).
	JITRefused   *state.JITRefusal       `json:"jitRefused,omitempty"`
	Registration string                  `json:"registration,omitempty"` // its purpose only
	Signals      map[string]state.Signal `json:"signals"`
	Terminated   string                  `json:"terminatedReason,omitempty"`
}

// View is the record as ops shows it.
func View(i state.Instance) InstanceView {
	v := InstanceView{ID: i.ID, Pool: i.Pool, Owner: i.Owner, State: i.State, RunID: i.RunID, Assignment: i.Assignment,
		InstanceType: i.InstanceType, UsageClass: i.UsageClass, Uses: i.Uses, LaunchedAt: i.LaunchedAt, PooledAt: i.PooledAt,
		LeaseUntil: i.Threshold, HeartbeatAt: i.HeartbeatAt, Heartbeats: i.Heartbeats, RunnerName: i.RunnerName,
		RunnerID: i.GithubRunnerID, JITSeq: i.JITSeq, Signals: map[string]state.Signal{}, Terminated: i.TerminatedReason}
	if i.Registration != nil {
		v.Registration = i.Registration.Purpose
	}
	if i.JITRefused != nil {
		r := *i.JITRefused
		v.JITRefused = &r
	}
	for name, s := range i.Signals {
		v.Signals[name] = s
	}
	return v
}

// Instances lists the live instances of pool ("" every pool) in st (""
// every live state), by pool, state and id.
func Instances(ctx context.Context, r Reader, pool string, st state.State) ([]InstanceView, error) {
	if st != "" && !slices.Contains(LiveStates, st) {
		return nil, BadInput("--state", fmt.Sprintf("%q is not one of %s", st, joinStates(LiveStates)))
	}
	pools, err := r.ListPoolConfigs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	var names []string
	for _, p := range pools {
		names = append(names, p.Name)
	}
	if pool != "" {
		if !slices.Contains(names, pool) {
			return nil, BadInput("--pool", fmt.Sprintf("no pool %q in this table (pools: %s)", pool, strings.Join(names, ", ")))
		}
		names = []string{pool}
	}
	states := LiveStates
	if st != "" {
		states = []state.State{st}
	}
	out := []InstanceView{}
	for _, name := range names {
		for _, s := range states {
			insts, err := live(ctx, r, name, s)
			if err != nil {
				return nil, err
			}
			for _, in := range insts {
				out = append(out, View(in))
			}
		}
	}
	return out, nil
}

func joinStates(states []state.State) string {
	s := make([]string, len(states))
	for i, st := range states {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}
