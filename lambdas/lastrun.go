package main

import (
	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/refresh"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/scaledown"
)

// lastRunOf is what the operator's status shows of a scheduled function's
// invocation (nil for the others, and for a run skipped because another
// held the single-flight lease).
func lastRunOf(handler string, out any, err error, seconds float64) *state.LastRun {
	if controlplane.IsInput(err) {
		return nil // bad input changes nothing, not even this
	}
	r := &state.LastRun{Handler: handler, Seconds: seconds, Counts: map[string]int{}}
	if err != nil {
		r.Error = err.Error()
	}
	if out == nil && err != nil && (handler == bundle.HandlerRefresh || handler == bundle.HandlerScaleDown) {
		return r // failed before it ran: the configuration, GitHub's credentials
	}
	switch o := out.(type) {
	case *refresh.Output:
		if o == nil && err == nil || o != nil && o.Skipped != "" {
			return nil
		}
		if o != nil {
			r.Counts["terminated"], r.Counts["expired"], r.Counts["repooled"] = len(o.Terminated), len(o.Expired), len(o.Repooled)
			r.Counts["prewarmed"], r.Counts["joined"], r.Counts["kept"] = len(o.Prewarmed), len(o.Joined), len(o.Kept)
			r.Counts["adopted"] = len(o.Adopted)
		}
	case *scaledown.Output:
		if o == nil && err == nil || o != nil && o.Skipped != "" {
			return nil
		}
		if o != nil {
			r.Counts["terminated"], r.Counts["kept"], r.Counts["orphaned"] = len(o.Terminated), len(o.Kept), len(o.Orphaned)
			r.Counts["untagged"], r.Counts["deferred"], r.Counts["ghostsSwept"] = len(o.Untagged), len(o.Deferred), len(o.Swept)
		}
	default:
		return nil
	}
	return r
}
