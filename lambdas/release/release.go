// Package release is the release function (docs/design.md): it hands a run's runners back to the pool through the
// asynchronous handshake with their agents.
package release

import (
	"context"
	"encoding/json"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Input is the release payload.
type Input struct {
	RunID string `json:"runId"`
	// IDToken is the invoking job's GitHub Actions OIDC token: only the
	// workflow run that provisioned a run may release it.
	IDToken string `json:"idToken,omitempty"`
}

// Output says what happened to each instance of the run.
type Output struct {
	RunID          string   `json:"runId"`
	Released       []string `json:"released"`
	Expired        []string `json:"expired"`
	ElapsedSeconds float64  `json:"elapsedSeconds"`
	Note           string   `json:"note,omitempty"`
}

// ParsePayload decodes and checks a release payload; it calls nothing.
func ParsePayload(payload []byte) (Input, error) {
	var in Input
	if err := controlplane.Decode(payload, &in); err != nil {
		return in, err
	}
	return in, controlplane.CheckRunID(in.RunID)
}

// Deps are what release runs with: the control plane's only (it never
// calls EC2: an instance it cannot pool is expired, and refresh ends it).
type Deps struct {
	*controlplane.Deps
}

// Handle runs one release.
func Handle(ctx context.Context, deps Deps, payload json.RawMessage) (*Output, error) {
	start := time.Now()
	d := deps.Deps
	in, err := ParsePayload(payload)
	if err != nil {
		return nil, err
	}
	caller, err := d.Caller(ctx, "release", in.IDToken, in.RunID)
	if err != nil {
		return nil, err
	}
	return releaseRun(ctx, d, in.RunID, start, func(run *state.Run) error {
		if run.ScaleSet != "" {
			return controlplane.Invalid("runId", "run %s serves scale set %s: its listener releases it", in.RunID, run.ScaleSet)
		}
		return controlplane.Owns(run, caller)
	})
}

// ForScaleSet releases a standing run of scale set scaleSet (its id) for
// its listener, once the run's job ended: the instance is reaped, wiped
// and checked as at any run's end before it is pooled again. A run of
// any other scale set, or a workflow's run, is refused.
func ForScaleSet(ctx context.Context, deps Deps, runID, scaleSet string) (*Output, error) {
	if err := controlplane.CheckRunID(runID); err != nil {
		return nil, err
	}
	return releaseRun(ctx, deps.Deps, runID, time.Now(), func(run *state.Run) error {
		if run.ScaleSet != scaleSet {
			return controlplane.Invalid("runId", "run %s is not a standing run of scale set %s", runID, scaleSet)
		}
		return nil
	})
}

// releaseRun releases runID once owns accepts its run item.
func releaseRun(ctx context.Context, d *controlplane.Deps, runID string, start time.Time, owns func(*state.Run) error) (*Output, error) {
	in := Input{RunID: runID}
	out := &Output{RunID: in.RunID, Released: []string{}, Expired: []string{}}
	log := d.Log.With("runId", in.RunID)

	run, err := storeOf(d).GetRun(ctx, in.RunID)
	if err == nil {
		if err := owns(run); err != nil {
			return nil, err
		}
	}
	switch {
	case state.IsNotFound(err):
		out.Note = "no run with this runId: nothing to release"
	case err != nil:
		return nil, err
	case run.Status == state.RunReleased:
		out.Note = "run was released already"
	default:
		// Marking the run first stops a provision that is still waiting: it
		// re-reads the run item before every transition.
		if _, err := storeOf(d).SetRunStatus(ctx, in.RunID, state.RunReleased, "released", state.RunProvisioning, state.RunReady, state.RunFailed); err != nil && state.ClauseOf(err) != state.ClauseStatus {
			return nil, err
		}
	}

	ids, err := instancesOf(ctx, d, in.RunID, run)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for key, id := range ids {
		g.Go(func() error {
			got, err := releaseWithRetry(gctx, d, in.RunID, key)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			switch got {
			case controlplane.Released:
				out.Released = append(out.Released, id)
			case controlplane.Expired:
				out.Expired = append(out.Expired, id)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	sort.Strings(out.Released)
	sort.Strings(out.Expired)
	if out.Note == "" && len(ids) == 0 {
		out.Note = "the run has no instances"
	} else if out.Note != "" && len(out.Released)+len(out.Expired) > 0 {
		out.Note += "; leftover instances handled"
	}
	out.ElapsedSeconds = time.Since(start).Seconds()
	log.Info("release finished", "released", out.Released, "expired", out.Expired, "seconds", out.ElapsedSeconds)
	return out, nil
}

// instancesOf merges the by-run index (eventually consistent) with the ids
// the run item recorded, so a just-created instance is not missed, and
// returns their record keys with their instance ids. The run item's ids are
// keyed with the run's pool's instance role; when that pool is gone, the
// index alone answers (its records carry their keys).
func instancesOf(ctx context.Context, d *controlplane.Deps, runID string, run *state.Run) (map[state.Key]string, error) {
	out := map[state.Key]string{}
	if run != nil && len(run.InstanceIDs) > 0 {
		p, err := d.Pool(ctx, run.Pool)
		if err != nil && !state.IsNotFound(err) {
			return nil, err
		}
		for _, id := range run.InstanceIDs {
			if p != nil {
				out[p.RecordKey(id)] = id
			}
		}
	}
	indexed, err := storeOf(d).ByRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	for _, inst := range indexed {
		out[inst.Key] = inst.ID
	}
	return out, nil
}

// releaseWithRetry gives one instance back, retrying errors (a throttled or
// failing DynamoDB, GitHub) with backoff while the invocation has time: a
// release that fails leaves the run's instances running until their
// runtime cap. ReleaseInstance is safe to repeat: it reads the record and
// acts on its state.
func releaseWithRetry(ctx context.Context, d *controlplane.Deps, runID string, key state.Key) (controlplane.Outcome, error) {
	for attempt := 1; ; attempt++ {
		got, err := d.ReleaseInstance(ctx, runID, key)
		if err == nil {
			return got, nil
		}
		wait := min(time.Duration(attempt)*time.Second, 5*time.Second)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait+10*time.Second || attempt >= 10 {
			return got, err
		}
		d.Log.Warn("release of an instance failed; retrying", "record", key, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return got, err
		case <-time.After(wait):
		}
	}
}
