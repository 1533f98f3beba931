package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The sandbox's job API, standing in for a workflow's jobs: queue one for a
// provisioned run or a label, and read (or wait for) its outcome.

// The job API stands in for a workflow's jobs: POST {"runId","script"}
// queues a job for the runners of a provisioned run (under the label
// provision returned for it, as a workflow's runs-on names it), or
// {"label","script"} for runners with that label; GET
// /_sandbox/jobs/{id}?wait=60s waits for it to finish.
func (s *Sandbox) serveEnqueue(w http.ResponseWriter, r *http.Request) {
	var req struct{ RunID, Label, Script string }
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || (req.Label == "") == (req.RunID == "") {
		http.Error(w, `body: want {"runId":"<runId>","script":"echo hi"} or {"label":"<label>","script":"echo hi"}`, http.StatusBadRequest)
		return
	}
	if req.RunID != "" {
		run, err := state.New(s.AWS.DynamoDB(), s.Table()).GetRun(r.Context(), req.RunID)
		if err != nil || run.Label == "" {
			http.Error(w, fmt.Sprintf("runId: no provisioned run %q (%v): provision it first", req.RunID, err), http.StatusNotFound)
			return
		}
		req.Label = run.Label
	}
	if req.Script == "" {
		req.Script = "echo hello from $(hostname)"
	}
	id := s.GitHub.EnqueueJob(req.Label, req.Script)
	json.NewEncoder(w).Encode(map[string]any{"id": id, "label": req.Label})
}

func (s *Sandbox) serveJob(w http.ResponseWriter, r *http.Request) {
	var id int64
	if _, err := fmt.Sscan(r.PathValue("id"), &id); err != nil {
		http.Error(w, "id: not a number", http.StatusBadRequest)
		return
	}
	job, ok := s.GitHub.Job(id)
	if !ok {
		http.Error(w, "no such job", http.StatusNotFound)
		return
	}
	if wait, err := time.ParseDuration(r.URL.Query().Get("wait")); err == nil && wait > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		defer cancel()
		if done, err := s.GitHub.WaitJobContext(ctx, id); err == nil {
			job = done
		}
	}
	json.NewEncoder(w).Encode(map[string]any{"id": job.ID, "label": job.Label, "state": job.State, "result": job.Result, "runner": job.Runner, "output": job.Output})
}
