package ops

import (
	"context"
	"fmt"
	"slices"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// ghrunner run: one run and the records of the instances it was given.

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
