// Package ops answers an operator's questions about a deployment from its
// state table: what each pool holds now, which instances are in which
// state, what a run was given. It only reads; what it shows is the table
// at the moment of the read (the index behind the per-state lists may lag
// a write by a moment, which is why the counts are a view, never a
// decision: the functions decide on consistent reads).
package ops

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fielderr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Reader is what ops reads of the state table (*state.Store).
type Reader interface {
	ListPoolConfigs(ctx context.Context) ([]state.PoolConfig, error)
	ByPoolState(ctx context.Context, pool string, st state.State, before time.Time) ([]state.Instance, error)
	GetRun(ctx context.Context, runID string) (*state.Run, error)
	GetMany(ctx context.Context, keys []state.Key) (map[state.Key]*state.Instance, error)
	ByInstanceID(ctx context.Context, ids []string, roleIDs func(instanceID string) []string) (map[string]*state.Instance, error)
	GetLastRun(ctx context.Context, handler string) (*state.LastRun, error)
	GetSpotBreaker(ctx context.Context, pool string) (*state.SpotBreaker, error)
}

// StatusView is ghrunner status: the pools, and what the scheduled
// functions did last.
type StatusView struct {
	Pools []PoolStatus `json:"pools"`
	// Scheduled are the last runs of refresh and scale-down (absent:
	// not run yet).
	Scheduled []state.LastRun `json:"scheduled"`
	// ScaleSets are the pools' scale sets and what their listener saw
	// (scalesets.go).
	ScaleSets []ScaleSetView `json:"scaleSets"`
}

// Scheduled reads the last run of each scheduled function.
func Scheduled(ctx context.Context, r Reader, handlers ...string) ([]state.LastRun, error) {
	out := []state.LastRun{}
	for _, h := range handlers {
		last, err := r.GetLastRun(ctx, h)
		if err != nil {
			return nil, fmt.Errorf("last run of %s: %w", h, err)
		}
		if last != nil {
			out = append(out, *last)
		}
	}
	return out, nil
}

// LiveStates are the states an instance is listed by (a terminated
// record leaves the index).
var LiveStates = []state.State{state.Created, state.Claimed, state.Running, state.Idle, state.Stopped}

// PoolStatus is one pool now.
type PoolStatus struct {
	Pool         string              `json:"pool"`
	Owner        string              `json:"owner"`
	Registration string              `json:"registration"`
	MaxInstances int                 `json:"maxInstances"`
	Counts       map[state.State]int `json:"counts"`
	// IdleWindow is the window active now (the idle count scale-down
	// keeps), nil when none is: then it keeps no idle instance.
	IdleWindow *state.IdleWindow `json:"idleWindow"`
	// OldestIdleSeconds is how long the longest-pooled idle instance has
	// waited (0: none idle).
	OldestIdleSeconds int64    `json:"oldestIdleSeconds"`
	RunsInFlight      []string `json:"runsInFlight"`
	// Draining is an operator's drain (ghrunner drain).
	Draining bool `json:"draining"`
	// RunnerSpec is the pool's runner_version ("latest" or x.y.z; "" for
	// a pool written before pools had one), RunnerTarget what its
	// instances are to run now ("" none yet), RunnerVersions its live
	// instances by the version their agents report ("unknown": none yet).
	RunnerSpec     string         `json:"runnerSpec,omitempty"`
	RunnerTarget   string         `json:"runnerTarget,omitempty"`
	RunnerVersions map[string]int `json:"runnerVersions"`
	// JITRefused counts, by live instance, the just-in-time requests of
	// its current assignment the control plane refused by what they
	// would cost (absent: none).
	JITRefused map[string]int `json:"jitRefused,omitempty"`
	// SpotBreaker is a spot pool's breaker now (absent: an on-demand pool).
	SpotBreaker *SpotBreakerStatus `json:"spotBreaker,omitempty"`
}

// SpotBreakerStatus is a spot pool's breaker (state.SpotBreaker) now.
type SpotBreakerStatus struct {
	Open bool `json:"open"`
	// OpenUntil is when its launches may use spot again (0: closed).
	OpenUntil int64 `json:"openUntil,omitempty"`
	// Interruptions counts those within the breaker's window.
	Interruptions int `json:"interruptions"`
	// OnDemand says whether an open breaker launches on-demand: only
	// where the pool allows it (on_demand_fallback).
	OnDemand bool `json:"onDemand"`
}

// spotBreaker reads a spot pool's breaker (nil for an on-demand pool).
func spotBreaker(ctx context.Context, r Reader, p state.PoolConfig, now time.Time) (*SpotBreakerStatus, error) {
	if p.UsageClass != state.UsageClassSpot {
		return nil, nil
	}
	b, err := r.GetSpotBreaker(ctx, p.Name)
	if err != nil {
		return nil, fmt.Errorf("pool %s, spot breaker: %w", p.Name, err)
	}
	out := &SpotBreakerStatus{Open: b.Open(now), Interruptions: len(b.Recent(now))}
	if out.Open {
		out.OpenUntil = b.OpenUntil
		_, out.OnDemand = state.LaunchClass(state.UsageClassSpot, &p, b, now)
	}
	return out, nil
}

// live lists the records of pool in st: the index finds them, a
// consistent batch read gets all of each (the index projects only what
// the functions query by). A record that left st in between is skipped.
func live(ctx context.Context, r Reader, pool string, st state.State) ([]state.Instance, error) {
	found, err := r.ByPoolState(ctx, pool, st, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("pool %s, %s instances: %w", pool, st, err)
	}
	keys := make([]state.Key, len(found))
	for i, in := range found {
		keys[i] = in.Key
	}
	full, err := r.GetMany(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("pool %s, %s instances: %w", pool, st, err)
	}
	out := []state.Instance{}
	for _, key := range slices.Sorted(slices.Values(keys)) {
		if rec := full[key]; rec != nil && rec.State == st && rec.Pool == pool {
			out = append(out, *rec)
		}
	}
	return out, nil
}

// Status reads every pool's configuration and live instances.
func Status(ctx context.Context, r Reader, now time.Time) ([]PoolStatus, error) {
	pools, err := r.ListPoolConfigs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	out := make([]PoolStatus, 0, len(pools))
	for _, p := range pools {
		ps := PoolStatus{Pool: p.Name, Owner: p.Owner, Registration: p.Registration, MaxInstances: p.MaxInstances,
			Counts: map[state.State]int{}, RunsInFlight: []string{}, Draining: p.Draining,
			RunnerSpec: p.Runner.Version, RunnerVersions: map[string]int{}}
		if t := p.RunnerTarget(); t != nil {
			ps.RunnerTarget = t.Version
		}
		if ps.Registration == "" {
			ps.Registration = state.RegistrationToken
		}
		if w, ok := p.ActiveWindow(now); ok {
			ps.IdleWindow = &w
		}
		if ps.SpotBreaker, err = spotBreaker(ctx, r, p, now); err != nil {
			return nil, err
		}
		runs := map[string]bool{}
		for _, st := range LiveStates {
			insts, err := live(ctx, r, p.Name, st)
			if err != nil {
				return nil, err
			}
			ps.Counts[st] = len(insts)
			for _, in := range insts {
				if in.RunID != "" {
					runs[in.RunID] = true
				}
				ps.RunnerVersions[cmp.Or(in.RunnerVersion, "unknown")]++
				if r := in.JITRefusedNow(); r.Count > 0 {
					if ps.JITRefused == nil {
						ps.JITRefused = map[string]int{}
					}
					ps.JITRefused[in.ID] = r.Count
				}
				if st == state.Idle && in.PooledAt > 0 {
					ps.OldestIdleSeconds = max(ps.OldestIdleSeconds, now.Unix()-in.PooledAt)
				}
			}
		}
		for id := range runs {
			ps.RunsInFlight = append(ps.RunsInFlight, id)
		}
		sort.Strings(ps.RunsInFlight)
		out = append(out, ps)
	}
	return out, nil
}

// BadInput is the operator's input refused: a *fielderr.Error of source
// fielderr.Operator, naming the input and the rule it broke.
func BadInput(field, rule string) error {
	return &fielderr.Error{Source: fielderr.Operator, Field: field, Rule: rule}
}

// IsBadInput says whether err is the operator's input, not the table.
func IsBadInput(err error) bool { return fielderr.Is(err, fielderr.Operator) }

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

// RunView is a run with the records of the instances it was given.
type RunView struct {
	ID    string `json:"runId"`
	Pool  string `json:"pool"`
	Owner string `json:"owner,omitempty"`
	Label string `json:"label,omitempty"`
	// Who provisioned it (the invoking job's verified token): only that
	// workflow run may get its label again or release it.
	Repository    string          `json:"repository,omitempty"`
	RepositoryID  string          `json:"repositoryId,omitempty"`
	WorkflowRun   string          `json:"workflowRunId,omitempty"`
	RunAttempt    string          `json:"runAttempt,omitempty"`
	Status        state.RunStatus `json:"status"`
	Detail        string          `json:"detail,omitempty"`
	InstanceCount int             `json:"instanceCount"`
	CreatedAt     int64           `json:"createdAt"`
	UpdatedAt     int64           `json:"updatedAt"`
	Instances     []InstanceView  `json:"instances"`
	// Interrupted are its instances EC2 took back after a spot notice,
	// Rerun what was done about their jobs (state.Run).
	Interrupted []string `json:"interrupted,omitempty"`
	Rerun       string   `json:"rerun,omitempty"`
}

// Run reads a run and its instances' records (consistent reads: the
// instances as they are, whatever run they serve now).
func Run(ctx context.Context, r Reader, runID string) (*RunView, error) {
	if runID == "" {
		return nil, BadInput("run id", "must not be empty")
	}
	run, err := r.GetRun(ctx, runID)
	if state.IsNotFound(err) {
		return nil, BadInput("run id", fmt.Sprintf("no run %q in this table (runs are kept a while after they end, then expire)", runID))
	}
	if err != nil {
		return nil, err
	}
	recs, err := runRecords(ctx, r, run)
	if err != nil {
		return nil, fmt.Errorf("read the run's instances: %w", err)
	}
	v := &RunView{ID: run.ID, Pool: run.Pool, Owner: run.Owner, Label: run.Label, Status: run.Status, Detail: run.Detail,
		Repository: run.Repository, RepositoryID: run.RepositoryID, WorkflowRun: run.WorkflowRunID, RunAttempt: run.RunAttempt,
		InstanceCount: run.InstanceCount, CreatedAt: run.CreatedAt, UpdatedAt: run.UpdatedAt, Instances: []InstanceView{},
		Interrupted: run.Interrupted, Rerun: run.Rerun}
	for _, id := range slices.Sorted(slices.Values(run.InstanceIDs)) {
		if rec := recs[id]; rec != nil {
			v.Instances = append(v.Instances, View(*rec))
		}
	}
	return v, nil
}

func joinStates(states []state.State) string {
	s := make([]string, len(states))
	for i, st := range states {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

// runRecords reads the records of a run's instances, by instance id. The
// run item names them by id; their keys carry the run's pool's instance
// role (state.Store.ByInstanceID).
func runRecords(ctx context.Context, r Reader, run *state.Run) (map[string]*state.Instance, error) {
	pools, err := r.ListPoolConfigs(ctx)
	if err != nil {
		return nil, err
	}
	role := state.RolesByPool(pools)[run.Pool]
	return r.ByInstanceID(ctx, run.InstanceIDs, func(string) []string { return []string{role} })
}

// Writer is what Retire needs of the state table (*state.Store).
type Writer interface {
	FindInstance(ctx context.Context, instanceID string) (*state.Instance, error)
	Expire(ctx context.Context, r state.Ref, reason string) (*state.Instance, error)
}

// Retire ends an idle instance's time in the pool: its lease is expired
// (no claim takes it from then on) and refresh terminates it. It refuses
// an instance that serves a run (release the run instead), and the write
// is bound to the assignment it read: a provision that claims the
// instance meanwhile wins, and Retire changes nothing.
func Retire(ctx context.Context, w Writer, instanceID, reason string) (*InstanceView, error) {
	if instanceID == "" {
		return nil, BadInput("instance id", "must not be empty")
	}
	if strings.TrimSpace(reason) == "" {
		reason = "operator"
	}
	rec, err := w.FindInstance(ctx, instanceID)
	if state.IsNotFound(err) {
		return nil, BadInput("instance id", fmt.Sprintf("no record of %s in this table", instanceID))
	}
	if err != nil {
		return nil, err
	}
	if rec.State != state.Idle {
		what := string(rec.State)
		if rec.RunID != "" {
			what += " for run " + rec.RunID
		}
		return nil, BadInput("instance id", fmt.Sprintf("%s is %s: retire takes idle instances only (release its run, or wait for refresh); nothing changed", instanceID, what))
	}
	done, err := w.Expire(ctx, rec.Ref(), "retired: "+reason)
	if c := state.ClauseOf(err); c != "" {
		return nil, BadInput("instance id", fmt.Sprintf("%s changed while retiring it (%s: %v); nothing changed, look again", instanceID, c, err))
	}
	if err != nil {
		return nil, err
	}
	v := View(*done)
	return &v, nil
}
