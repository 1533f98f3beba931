package sandbox

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
)

// The sandbox's pools (examples/sandbox): the same settings, one with a
// just-in-time runner per job (the default) and one with registration
// tokens (the fallback for GitHub Enterprise Server without JIT).
const (
	PoolJIT   = "linux"
	PoolToken = "linux-token"
)

// Pools are the sandbox's pools.
var Pools = []string{PoolJIT, PoolToken}

// Split is where the time to ready went for the slowest instance of a
// provision (the one the workflow waited for), from the function's answer
// and GitHub's view.
type Split struct {
	Claim       time.Duration // invoke → the instance is the run's (claimed, or launched and recorded)
	Config      time.Duration // → its runner's configuration is in its record
	RunnerStart time.Duration // → its runner is online at GitHub (the agent read the record, started the runner)
	Signal      time.Duration // → provision saw the agent's ready signal
	Total       time.Duration // invoke → provision answered
}

func (s Split) String() string {
	return fmt.Sprintf("claim/launch %.2fs · config %.2fs · runner start %.2fs · ready signal %.2fs",
		s.Claim.Seconds(), s.Config.Seconds(), s.RunnerStart.Seconds(), s.Signal.Seconds())
}

// SplitOf splits a provision invoked at start and answered with out at
// answered, with the registrations GitHub saw. The function's own offsets
// are measured from its own start, which the invoke's overhead (a process
// started, the runtime API) puts after start: it is taken as answered less
// the function's elapsed time, so that an offset and GitHub's clock meet on
// one time line (taking the offsets from start made the ready signal come
// before the runner was online, by that overhead). The overhead counts in
// the claim.
func SplitOf(start, answered time.Time, out provision.Output, history []fakegithub.Registration) (Split, bool) {
	if len(out.Instances) == 0 {
		return Split{}, false
	}
	slowest := slices.MaxFunc(out.Instances, func(a, b provision.Instance) int { return cmp.Compare(a.ReadySeconds, b.ReadySeconds) })
	var online time.Time
	for _, r := range history {
		if id, ok := github.InstanceOf(r.Name); ok && id == slowest.InstanceID && !r.Online.IsZero() && r.From.After(start) &&
			(online.IsZero() || r.Online.Before(online)) {
			online = r.Online
		}
	}
	if online.IsZero() {
		return Split{}, false
	}
	sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	began := answered.Add(-sec(out.ElapsedSeconds))
	if began.Before(start) {
		began = start
	}
	configured := began.Add(sec(slowest.ConfiguredSeconds))
	return Split{
		Claim:       began.Sub(start) + sec(slowest.ClaimedSeconds),
		Config:      sec(slowest.ConfiguredSeconds - slowest.ClaimedSeconds),
		RunnerStart: online.Sub(configured),
		Signal:      began.Add(sec(slowest.ReadySeconds)).Sub(online),
		Total:       answered.Sub(start),
	}, true
}

// Gaps are, for every job that followed another on the same instance,
// how long after the earlier one finished the instance had a runner online
// for it (a just-in-time pool's next runner; a token pool's runner was
// never offline: zero) and the job started.
type Gaps struct {
	Online, Started []time.Duration
}

// NextJobGaps measures the gaps between the jobs of a run on each of its
// instances.
func NextJobGaps(jobs []fakegithub.Job, history []fakegithub.Registration) Gaps {
	byInstance := map[string][]fakegithub.Job{}
	for _, j := range jobs {
		if id, ok := github.InstanceOf(j.Runner); ok && !j.Started.IsZero() && !j.Finished.IsZero() {
			byInstance[id] = append(byInstance[id], j)
		}
	}
	onlineOf := map[int64]time.Time{}
	for _, r := range history {
		onlineOf[r.RunnerID] = r.Online
	}
	var g Gaps
	for _, js := range byInstance {
		sort.Slice(js, func(a, b int) bool { return js[a].Started.Before(js[b].Started) })
		for i := 1; i < len(js); i++ {
			prev, next := js[i-1], js[i]
			g.Started = append(g.Started, next.Started.Sub(prev.Finished))
			online := onlineOf[next.RunnerID]
			g.Online = append(g.Online, max(0, online.Sub(prev.Finished)))
		}
	}
	return g
}

// Quantile is the q-quantile of ds (nearest rank), 0 when there are none.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}
