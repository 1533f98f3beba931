package provision

import (
	"crypto/rand"
	"strings"
)

// newLabel makes the runner label of a new run: ghr-<runId>-<16 random
// base-32 characters>, 80 bits. Run ids are sequential and public, so a
// label made of the run id alone would let any repository allowed to use
// the runners (a fork's pull request on a public one) aim a job at another
// run's runners. The run item keeps it, so a retried provision of the run
// answers the same label.
func newLabel(runID string) string {
	return "ghr-" + runID + "-" + strings.ToLower(rand.Text()[:16])
}
