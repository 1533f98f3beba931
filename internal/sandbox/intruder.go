package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// Intruder is another repository the invoker role trusts: its workflows
// may invoke provision and release, but own none of Repo's runs.
const Intruder = Org + "/other"

// intruders tallies chaos's attempts of another repository's workflow on
// runs not its own (docs/security.md, T7) and what they got.
type intruders struct {
	mu         sync.Mutex
	tried      int
	refused    map[string]int // by the refusal's first words
	violations []string
}

// intrude plays a workflow of Intruder that learned runID while the run's
// own workflow holds it: it asks provision for the run with the run's own
// payload (joining it would answer the label, which lets its jobs reach
// the run's runners) and release for it (taking them away mid-run), with a
// genuine token of its own job that even names the same run_id. Both must be refused without telling the label; a refusal
// for another reason (an injected fault) is no violation, an answer is.
func (c *chaos) intrude(ctx context.Context, runID, pool string, count int, label string) {
	c.count(faultIntruder)
	for _, call := range []struct {
		handler string
		payload map[string]any
	}{
		{"provision", map[string]any{"runId": runID, "pool": pool, "instanceCount": count}},
		{"release", map[string]any{"runId": runID}},
	} {
		call.payload["idToken"] = c.sb.GitHub.IDToken(fakegithub.Workflow{Repository: Intruder, RunID: runID}, Audience)
		var out json.RawMessage
		err := c.invoke(ctx, call.handler, call.payload, &out)
		c.intr.mu.Lock()
		c.intr.tried++
		switch {
		case err == nil:
			c.intr.violations = append(c.intr.violations, fmt.Sprintf("%s of run %s by a workflow of %s was answered: %.200s", call.handler, runID, Intruder, out))
		case label != "" && strings.Contains(err.Error(), label):
			c.intr.violations = append(c.intr.violations, fmt.Sprintf("%s of run %s by a workflow of %s was refused, telling the run's label: %.200s", call.handler, runID, Intruder, err))
		default:
			// "invalid payload: idToken: repository_id N (acme/other)"
			why := err.Error()
			if _, after, found := strings.Cut(why, "invalid payload: "); found {
				why = after
			}
			why, _, _ = strings.Cut(why, " is not")
			why = call.handler + ": " + why
			if c.intr.refused == nil {
				c.intr.refused = map[string]int{}
			}
			c.intr.refused[variablePart.ReplaceAllString(why, "N")]++
		}
		c.intr.mu.Unlock()
	}
}

// shouldIntrude: the first workflow that got its runners meets an
// intruder, and about one in four after it.
func (c *chaos) shouldIntrude() bool {
	c.intr.mu.Lock()
	first := c.intr.tried == 0
	c.intr.mu.Unlock()
	return first || c.intn(4) == 0
}

// checkIntruders returns the violations: any intrusion answered, or a
// refusal that told the label; and none tried at all, which tests nothing.
func (c *chaos) checkIntruders() []string {
	c.intr.mu.Lock()
	defer c.intr.mu.Unlock()
	v := append([]string(nil), c.intr.violations...)
	if c.intr.tried == 0 {
		v = append(v, "no workflow of another repository tried a run not its own: the invariant \"a run belongs to its workflow\" was not exercised")
	}
	fmt.Fprintf(c.out, "  another repository's workflows: %d calls on runs not their own, refused %v\n", c.intr.tried, c.intr.refused)
	return v
}
