package provision

import (
	"crypto/rand"
	"strings"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// newLabel makes the runner label of a new run. Minted (the default), it is
// ghr-<runId>-<16 random base-32 characters, 80 bits: run ids are
// sequential and public, so a label made of the run id alone lets any
// repository allowed to use the runners (a fork's pull request on a public
// one) aim a job at another run's runners. The run item keeps it, so a
// retried provision of the run answers the same label.
func newLabel(runID, mode string) string {
	if mode == state.LabelRunID {
		return runID
	}
	return "ghr-" + runID + "-" + strings.ToLower(rand.Text()[:16])
}

// runLabel is a run's label; a run item written before labels were minted
// has none, and its runners carry the run id.
func runLabel(run *state.Run) string {
	if run.Label == "" {
		return run.ID
	}
	return run.Label
}
