package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Minting just-in-time configurations (state/jit.go). Invariants:
//   - a configuration is written only for a record that is created,
//     claimed or running for a run that is neither released nor failed,
//     under the assignment it was asked for, with a live lease;
//   - at most one configuration per number and assignment reaches the
//     record (PutJIT's condition);
//   - a runner the record names, or one with a listener, is never deleted
//     here: a runner minted for a write that was refused is deleted at
//     once, one whose write has an unknown outcome only once the record
//     shows it was not written, and one a killed invocation left behind
//     (the name taken at the retry) only when the record does not name it
//     and no listener has it.

// MintWhy says why a record gets no configuration now ("" when it does):
// the pure decision of the stream consumer, given the record, its run and
// the run's pool. The record is the instance's request, not an authority
// (docs/security.md, T6): the run it names must list the instance (the id
// its key ends with) and not have given it up, and the key must be of the
// run's pool's instance role, so an instance that rewrote its runId or
// pool gets nothing of another run or pool; owner, group and label come
// from the run and its pool, never from the record.
func MintWhy(rec *state.Instance, run *state.Run, p *state.PoolConfig, now time.Time) string {
	switch {
	case rec == nil:
		return "no record"
	case rec.State != state.Created && rec.State != state.Claimed && rec.State != state.Running:
		return "instance is " + string(rec.State)
	case rec.RunID == "":
		return "instance has no run"
	case rec.JITWanted() == 0:
		return "no configuration asked for"
	case rec.Threshold <= now.Unix():
		return "lease has passed"
	case run == nil || run.ID != rec.RunID:
		return "run " + rec.RunID + " not found"
	case run.Status == state.RunReleased || run.Status == state.RunFailed:
		return "run is " + string(run.Status)
	case run.ScaleSet != "":
		// Its one runner is the scale set's, minted by the listener with
		// the claim; a runner that ended took its job (or was removed),
		// and the listener gives the instance back to the pool.
		return "run " + run.ID + " serves scale set " + run.ScaleSet + ": its runner comes from the listener, one per job"
	case !run.Member(rec.Key.InstanceID()):
		return "instance " + rec.Key.InstanceID() + " is not one of run " + run.ID + "'s (never was, or given up)"
	case p == nil || p.Name != run.Pool:
		return "pool " + run.Pool + " of run " + run.ID + " not found"
	case rec.Key.RoleID() != p.InstanceRoleID:
		return "record " + string(rec.Key) + " is not of pool " + p.Name + "'s instance role"
	}
	return ""
}

// GroupID is the runner group id a pool's runners join: the pool's named
// group of an organization, else Default (1; a repository's only group).
// Found by paging through the owner's groups, so kept in d.Groups.
func (d *Deps) GroupID(ctx context.Context, p *state.PoolConfig) (int64, error) {
	if p.RunnerGroup == "" || strings.Contains(p.Owner, "/") {
		return 1, nil
	}
	if id, ok := d.Groups.get(p.Owner, p.RunnerGroup); ok {
		return id, nil
	}
	id, err := d.GitHub.RunnerGroupID(ctx, p.Owner, p.RunnerGroup)
	if err != nil {
		return 0, fmt.Errorf("runner group %q of %s: %w", p.RunnerGroup, p.Owner, err)
	}
	d.Groups.put(p.Owner, p.RunnerGroup, id)
	return id, nil
}

// MintJIT asks GitHub for the nth just-in-time runner of rec's assignment,
// labelled label in group groupID, and writes its configuration into the
// record. On a lost write the runner is deleted and the *state.ConditionError
// returned.
func (d *Deps) MintJIT(ctx context.Context, rec *state.Instance, n int, label string, groupID int64) (*state.Instance, error) {
	name := state.JITRunnerName(rec.Uses, n, rec.ID)
	minted := rec.JITRunners // as read with jitSeq n-1: PutJITServed's condition
	cfg, err := d.GitHub.GenerateJITConfig(ctx, rec.Owner, name, groupID, []string{label})
	if github.IsNameTaken(err) {
		// Written already (a redelivered request, or a write whose answer
		// was lost), or left by an attempt killed before its write. Only
		// the record tells, and only a runner no listener uses may go.
		old, ferr := d.GitHub.RunnerNamed(ctx, rec.Owner, name)
		if ferr != nil {
			return nil, fmt.Errorf("the name %s is taken and its runner cannot be read: %w", name, ferr)
		}
		cur, gerr := d.Store.Get(ctx, rec.Key)
		if gerr != nil {
			return nil, gerr
		}
		if holds(cur, old.ID) || cur.Assignment != rec.Assignment || cur.JITSeq >= n {
			return cur, nil // answered, or moved on: nothing to mint
		}
		if old.Online() || old.Busy {
			return nil, fmt.Errorf("runner %s, not in the record, has a listener: left alone", name)
		}
		if derr := d.GitHub.DeleteRunner(ctx, rec.Owner, old.ID); derr != nil {
			return nil, fmt.Errorf("delete the unwritten runner %s: %w", name, derr)
		}
		minted = cur.JITRunners
		cfg, err = d.GitHub.GenerateJITConfig(ctx, rec.Owner, name, groupID, []string{label})
	}
	if err != nil {
		return nil, err
	}
	reg := state.Registration{Purpose: state.PurposeJIT, JITConfig: cfg.Encoded, Seq: n, RunnerID: cfg.RunnerID, RunnerName: cfg.Name,
		Labels: label}
	// rec.JITServed is what a look at GitHub just found (jitcap.go), or
	// what the record held.
	// The runner joins the record's jitRunners with it, for release to
	// delete whatever becomes of it (it may end without a job, still
	// registered: an update, a restart of the agent).
	out, err := d.Store.PutJITServed(ctx, rec.Key, rec.Assignment, reg, rec.JITServed, minted)
	if err == nil {
		d.Log.Info("just-in-time configuration written", "instanceId", rec.ID, "assignment", rec.Assignment, "seq", n, "runnerId", cfg.RunnerID)
		return out, nil
	}
	if state.ClauseOf(err) == "" {
		// No answer, or an error after the write may have landed: the
		// record tells. Unreadable, the runner is left (GitHub removes an
		// unused one; a retry finds the name taken and reads again).
		cur, gerr := d.Store.Get(ctx, rec.Key)
		if gerr != nil {
			return nil, err
		}
		if holds(cur, cfg.RunnerID) {
			return cur, nil
		}
	}
	// Refused, or not written: no record names the runner, no listener has it.
	if derr := d.GitHub.DeleteRunner(ctx, rec.Owner, cfg.RunnerID); derr != nil {
		err = errors.Join(err, fmt.Errorf("delete runner %d minted for the lost write: %w", cfg.RunnerID, derr))
	}
	return nil, err
}

// holds says whether the record names the runner: its configuration is
// written there (jitRunners, the control plane's own list, or the
// registration), or its agent started it.
func holds(rec *state.Instance, runnerID int64) bool {
	return rec != nil && (rec.GithubRunnerID == runnerID || rec.Registration != nil && rec.Registration.RunnerID == runnerID ||
		slices.Contains(rec.JITRunners, runnerID))
}

// RunnerIDs are the ids of every runner inst's record names, each once:
// the one its agent started last and a just-in-time one written but not
// started (both the agent's attributes), then the just-in-time runners
// the control plane minted since the last claim (jitRunners, its own),
// newest first. A runner that ended without a job (it exited for an
// update, or the agent replaced it) stays registered, offline, until it is
// deleted, while the agent names only the last. Each is deleted only if
// GitHub names it after the instance (DeleteInstanceRunner).
func RunnerIDs(inst *state.Instance) []int64 {
	var ids []int64
	add := func(id int64) {
		if id != 0 && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	add(inst.GithubRunnerID)
	if reg := inst.Registration; reg != nil && reg.Purpose == state.PurposeJIT {
		add(reg.RunnerID)
	}
	for i := len(inst.JITRunners) - 1; i >= 0; i-- {
		add(inst.JITRunners[i])
	}
	return ids
}

// deleteJITRunners deletes the just-in-time runners an instance still has
// registered at release: every one its record names (RunnerIDs). GitHub
// removes one only after a job, and one may have taken none: the one its
// agent started last, one written but not yet started, one that exited
// for an update or that the agent replaced. inst is the record as read
// before the release, whose condition on jitSeq makes sure no runner was
// minted since. One gone already is no error. GitHub refuses to delete a
// runner running a job: the agent is stopping it, so the delete is tried
// again until wait passes. One that cannot be deleted does not keep the
// others: all are tried, and the errors returned. A GitHub call per
// runner: at most as many as minting them took (state.MaxJITRunners
// bounds them).
func (d *Deps) deleteJITRunners(ctx context.Context, inst *state.Instance, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	var errs []error
	for _, id := range RunnerIDs(inst) {
		for {
			err := d.DeleteInstanceRunner(ctx, inst.Owner, id, inst.ID)
			if err == nil {
				break
			}
			if !github.IsBusy(err) || time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("delete just-in-time runner %d: %w", id, err))
				break
			}
			select {
			case <-ctx.Done():
				return errors.Join(append(errs, ctx.Err())...)
			case <-time.After(d.retryEvery()):
			}
		}
	}
	return errors.Join(errs...)
}

// DeleteInstanceRunners deletes every runner inst's record names
// (RunnerIDs) that GitHub names after the instance, once each, for an
// instance that is ending: one busy is not waited for. It returns what
// went wrong.
func (d *Deps) DeleteInstanceRunners(ctx context.Context, inst *state.Instance) error {
	var errs []error
	for _, id := range RunnerIDs(inst) {
		if err := d.DeleteInstanceRunner(ctx, inst.Owner, id, inst.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
