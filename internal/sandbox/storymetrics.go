package sandbox

import (
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/metrics"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/release"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/scaledown"
)

// LogFile is the file the functions' and agents' logs go to, or "" when
// Options.Logs is not a file.
func (s *Sandbox) LogFile() string {
	if f, ok := s.opts.Logs.(*os.File); ok {
		return f.Name()
	}
	return ""
}

// tally is what the story saw the functions return, to hold their metrics
// against.
type tally struct {
	reused, created map[string]int // per pool
	ready           map[string]int // instances ready, per pool
	provisionSecs   map[string]float64
	pooled, expired int
	scaledDown      int
}

func (t *tally) provisioned(o provision.Output) {
	if t.reused == nil {
		t.reused, t.created, t.ready, t.provisionSecs = map[string]int{}, map[string]int{}, map[string]int{}, map[string]float64{}
	}
	t.reused[o.Pool] += o.Reused
	t.created[o.Pool] += o.Created
	t.ready[o.Pool] += len(o.Instances)
	t.provisionSecs[o.Pool] += o.ElapsedSeconds
}

func (t *tally) released(o release.Output) {
	t.pooled += len(o.Released)
	t.expired += len(o.Expired)
}

func (t *tally) scaled(o scaledown.Output) { t.scaledDown += len(o.Terminated) }

// checkMetrics reads the EMF lines the functions wrote into the sandbox's
// log, as CloudWatch Logs would extract them, and holds each metric
// against what the story saw.
func (st *Story) checkMetrics() {
	st.check("the functions' metrics (EMF in their logs) agree with what they returned",
		"pool hits and misses, provision and release counts, terminations as played", func() (string, bool) {
			path := st.sb.LogFile()
			if path == "" {
				return "the sandbox's logs go to no file: nothing to read the metrics from", false
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return err.Error(), false
			}
			// The functions' lines only: the listener's task writes EMF too,
			// and its lines reach this shared log behind the sandbox's
			// "ecs …: " prefix (its log group holds them as written).
			var fns []string
			for _, line := range strings.Split(string(raw), "\n") {
				if !strings.HasPrefix(line, ecsLogPrefix) {
					fns = append(fns, line)
				}
			}
			points, err := metrics.Read(strings.NewReader(strings.Join(fns, "\n")))
			if err != nil {
				return "an EMF line CloudWatch would drop: " + err.Error(), false
			}
			st.mu.Lock()
			t := st.tally
			st.mu.Unlock()
			var bad []string
			want := func(what string, got float64, want float64) {
				if math.Abs(got-want) > 1e-6 {
					bad = append(bad, fmt.Sprintf("%s %g, played %g", what, got, want))
				}
			}
			prov := map[string]string{"function": bundle.HandlerProvision}
			for pool := range t.reused {
				p := map[string]string{"function": bundle.HandlerProvision, "pool": pool}
				hits, _ := metrics.Sum(points, "PoolHits", p)
				misses, _ := metrics.Sum(points, "PoolMisses", p)
				secs, _ := metrics.Sum(points, "ProvisionSeconds", p)
				_, ready := metrics.Sum(points, "ReadySeconds", p)
				want("PoolHits "+pool, hits, float64(t.reused[pool]))
				want("PoolMisses "+pool, misses, float64(t.created[pool]))
				want("ReadySeconds values "+pool, float64(ready), float64(t.ready[pool]))
				want("ProvisionSeconds sum "+pool, secs, t.provisionSecs[pool])
			}
			inv, _ := metrics.Sum(points, "Invocations", prov)
			errs, _ := metrics.Sum(points, "Errors", prov)
			want("provision Invocations", inv, float64(st.sb.Invocations()[st.d.Functions[bundle.HandlerProvision]]))
			want("provision Errors", errs, 0)
			rel := map[string]string{"function": bundle.HandlerRelease}
			relInv, _ := metrics.Sum(points, "Invocations", rel)
			pooled, _ := metrics.Sum(points, "InstancesPooled", rel)
			expired, _ := metrics.Sum(points, "InstancesExpiredAtRelease", rel)
			want("release Invocations", relInv, float64(st.sb.Invocations()[st.d.Functions[bundle.HandlerRelease]]))
			want("InstancesPooled", pooled, float64(t.pooled))
			want("InstancesExpiredAtRelease", expired, float64(t.expired))
			down, _ := metrics.Sum(points, "Terminations", map[string]string{"function": bundle.HandlerScaleDown, "reason": "scale-down"})
			want("scale-down Terminations", down, float64(t.scaledDown))
			if len(bad) > 0 {
				return strings.Join(bad, "; "), false
			}
			hits, _ := metrics.Sum(points, "PoolHits", prov)
			misses, _ := metrics.Sum(points, "PoolMisses", prov)
			return fmt.Sprintf("%d metrics read: %g provisions (%g pool hits, %g misses), %g releases (%d pooled), %d terminated by scale-down",
				len(points), inv, hits, misses, relInv, t.pooled, t.scaledDown), true
		})
}
