package sandbox

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
)

// startStatement is the provision role's statement that lets it start the
// environment's stopped instances (provider/policy.go).
const startStatement = "StartOwnInstances"

// preflightStart shows preflight's start check on the stopped tier, its
// instances stopped and nothing else playing: it passes; with the
// provision role's StartOwnInstances statement removed, as an account's
// policy might forbid starting, it fails naming UnauthorizedOperation and
// the endpoint denied only that dry run; put back, it passes again.
func (st *Story) preflightStart(ctx context.Context) {
	start := time.Now()
	var got []string
	ok := st.startCheck(ctx, &got, true)
	restore, err := st.sb.WithoutStatement(ctx, st.d.Functions[bundle.HandlerProvision], startStatement)
	if err != nil {
		got = append(got, "removing "+startStatement+": "+err.Error())
		ok = false
	} else {
		ok = st.startCheck(ctx, &got, false) && ok
		// Taken, so that the story's last IAM check sees none of them;
		// any other denial, before or meanwhile, fails this step instead.
		denied := st.sb.TakeDenials()
		var other []string
		for _, d := range denied {
			if d.Action != "ec2:StartInstances" {
				other = append(other, d.String())
			}
		}
		got = append(got, fmt.Sprintf("%d denied", len(denied)))
		if len(other) > 0 {
			got = append(got, "other denials: "+strings.Join(other, "; "))
		}
		ok = ok && len(denied) > 0 && len(other) == 0
		if err := restore(); err != nil {
			got = append(got, "putting "+startStatement+" back: "+err.Error())
			ok = false
		} else {
			ok = st.startCheck(ctx, &got, true) && ok
		}
	}
	st.record(Step{Name: "stopped tier: preflight checks that provision may start the tier's instances",
		Want: "start check ok; failed naming UnauthorizedOperation without " + startStatement + "; ok again once put back",
		Got:  strings.Join(got, "; "), Took: time.Since(start), OK: ok})
}

// startCheck runs preflight and reads its start check of the tier's pool,
// tried on an instance; it says whether the check is as wanted.
func (st *Story) startCheck(ctx context.Context, got *[]string, want bool) bool {
	var out provision.Output
	if err := st.invoke(ctx, bundle.HandlerProvision, map[string]any{"preflight": true}, &out); err != nil {
		*got = append(*got, "preflight: "+err.Error())
		return false
	}
	for _, c := range out.Checks {
		if c.Check != "start" || c.Pool != PoolStopped {
			continue
		}
		if c.OK {
			*got = append(*got, "start ok on "+c.Detail)
			return want && strings.HasPrefix(c.Detail, "i-") // tried, not "not tried"
		}
		*got = append(*got, "start failed: "+apiError(c.Detail))
		return !want && strings.Contains(c.Detail, "UnauthorizedOperation")
	}
	*got = append(*got, fmt.Sprintf("no start check of %s (status %s)", PoolStopped, out.Status))
	return false
}

// apiError is the part of an SDK error that names AWS's error code, cut
// short: the whole error names the request and its id besides.
func apiError(s string) string {
	if i := strings.Index(s, "api error "); i >= 0 {
		s = s[i:]
	}
	return s[:min(len(s), 120)]
}
