package controlplane

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// What an instance's request may cost (issue 36 item 1). The instance role
// may write its record's signals, so UD_JIT_NEXT is the instance's to
// write as often as it likes, from the instance or with its role's
// credentials from anywhere; each request served is a generate-jitconfig
// call against the owner's installation budget, which every pool and run
// of the owner shares, and a runner registered under the run's label. The
// agent's own cap (agent/lifecycle/jitcap.go) binds only an honest agent.
//
// Invariants, held by the control plane alone, whatever the record says:
//   - per assignment, GitHub is asked for the first configuration
//     (provision's) and at most JITLimits.Unused more while none of the
//     assignment's runners since the last one seen to take a job is seen
//     to take one (jitServed). "Seen" is GitHub's word, read by runner
//     name (ghr-<uses>-<n>-<instanceId>: the control plane's attributes):
//     busy, or gone (GitHub removes a just-in-time runner once its job is
//     over; one never used only after a day). A listener that is merely
//     online counts for nothing: an honest agent asks only once its runner
//     exited, and a runner's credentials, which the instance holds, can
//     keep one online without a job;
//   - gone is also what GitHub makes of a runner whose listener took no
//     job within a few minutes (actions/runner issue #4726: 2 to 6 after
//     "Listening for Jobs"; fakegithub's JITIdleAfter), and its REST API
//     does not tell that from a runner removed after its job. So only a
//     runner seen busy, or the last one written seen gone within IdleMin
//     of its writing (jitMintedAt: GitHub removes none idle that soon),
//     starts the count again; any other seen gone may have been removed
//     idle and lets through only the one runner after the last written
//     (creditGone). A run's job behind an approval, for which the agent
//     replaces runner after runner (agent/lifecycle/jitcap.go), is served
//     one runner per idle removal, and so is root on the instance that
//     lets its runners' listeners wait them out: one runner per
//     idle-removal period, while the lease lives (the agent extends it
//     only up to leaseCap, the control plane's). Gone cannot be told from
//     deleted either: a runner someone else deletes (an admin, a script
//     removing offline runners) soon after its writing counts as served
//     and earns the assignment at most Unused+1 more, once per deletion;
//     the instance cannot delete one itself. Accepted, not prevented
//     (docs/security.md, C20): an honest agent's runners are never seen
//     busy (it asks only after one exited), so "busy before" would refuse
//     it, and the run's jobs, which name their runners, are read only with
//     the App's Actions permission, which ghrunner does not ask for;
//   - over that, GitHub is asked only whether one of those runners took a
//     job (a "look", one call per runner not yet seen, at most Unused+1),
//     and a look that found none is repeated only after LookEvery,
//     doubling up to LookMax;
//   - within that cap the count alone bounds the cost (a mint per request,
//     and the take's jitSeq condition lets each number through once);
//     past it the control plane takes one request of an instance to
//     GitHub (a look, then perhaps a mint) at most once per Every, judged by its own
//     clock (jitAt, which only it writes), stamped by a conditional write
//     before the first GitHub call (state.TakeJITRequest), so no two
//     invocations pass at once;
//   - a refused request is answered: its clause and why are recorded in
//     the record (jitRefused, shown by ghrunner instances), the request is
//     removed (the refusal's own write would otherwise deliver it again),
//     and the function counts it (the JITRequestsRefused metric);
//   - an honest agent is never refused for long: it asks again every 5 s,
//     asks for a runner after one that took no job only 3 times in a row
//     (jitIdleCap: first + 2 more, exactly Unused's default), and a job's
//     cycle is longer than Every.

// JITLimits bound what one instance's requests cost.
type JITLimits struct {
	// Unused is how many configurations beyond the first an assignment
	// gets while none of its runners is seen to take a job.
	Unused int
	// Every is the least time between two requests of one instance
	// taken to GitHub (whole seconds: jitAt is unix seconds).
	Every time.Duration
	// LookEvery is the wait after a look that found no runner took a
	// job, doubling with each such look up to LookMax.
	LookEvery, LookMax time.Duration
	// IdleMin is less than GitHub leaves a just-in-time runner whose
	// listener takes no job: the last runner written and gone sooner
	// after its writing took a job.
	IdleMin time.Duration
}

// DefaultJITLimits: Unused is the agent's own cap less the first (3 runners
// in a row without a job), so an honest agent reaches the cap only where
// it gives up itself; one request per 2 s is far above one per job; a look
// that found nothing is repeated after 10 s (a runner that finished its
// job a moment ago may still be listed), then less and less often.
// IdleMin is under the least idle removal reported (2 minutes).
var DefaultJITLimits = JITLimits{Unused: 2, Every: 2 * time.Second, LookEvery: 10 * time.Second, LookMax: 15 * time.Minute, IdleMin: 90 * time.Second}

// JITVerdict is DecideJIT's answer.
type JITVerdict struct {
	// Look: ask GitHub which of the runners not yet seen took a job
	// (LookJIT), then decide again with looked set.
	Look bool
	// Clause is the clause a refused request fails ("" when it is not
	// refused), Why says it for the record and the operator.
	Clause state.Clause
	Why    string
}

// Refused reports whether the request gets nothing now.
func (v JITVerdict) Refused() bool { return v.Clause != "" }

// DecideJIT says what a request MintWhy allows may cost now: the pure
// decision of the stream consumer, on the record as read (its JITServed
// updated by a look when looked is set) and the control plane's clock.
func DecideJIT(rec *state.Instance, looked bool, now time.Time, l JITLimits) JITVerdict {
	n := rec.JITWanted()
	unused := rec.JITSeq - rec.JITServed // written since the last seen to take a job
	if unused <= l.Unused {
		// Within the cap the count bounds the cost, not the clock: an
		// honest agent's runners whose jobs take under Every must not wait.
		return JITVerdict{}
	}
	if !looked && rec.JITAt != 0 && now.Unix() < rec.JITAt+secs(l.Every) {
		return JITVerdict{Clause: state.ClauseJITRate, Why: fmt.Sprintf("a request of this instance was taken to GitHub %ds ago; one per %s past the cap", now.Unix()-rec.JITAt, l.Every)}
	}
	why := fmt.Sprintf("none of the assignment's configurations %d to %d was seen to take a job; at most %d beyond the last that did (or the first)", rec.JITServed+1, rec.JITSeq, l.Unused)
	if looked {
		return JITVerdict{Clause: state.ClauseJITUnused, Why: why}
	}
	prior := rec.JITRefusedNow()
	if prior.Seq == n && prior.Looks > 0 {
		if next := prior.LookedAt + secs(LookWait(prior.Looks, l)); now.Unix() < next {
			return JITVerdict{Clause: state.ClauseJITUnused, Why: fmt.Sprintf("%s; looked %d times, next look in %ds", why, prior.Looks, next-now.Unix())}
		}
	}
	return JITVerdict{Look: true}
}

// LookWait is the wait after the nth look in a row that found no runner
// took a job.
func LookWait(looks int, l JITLimits) time.Duration {
	w := l.LookEvery
	for i := 1; i < looks && w < l.LookMax; i++ {
		w *= 2
	}
	return min(w, l.LookMax)
}

func secs(d time.Duration) int64 { return int64(d / time.Second) }

// LookJIT is the number of the assignment's last runner GitHub shows took a
// job, looking from the last written back to the last already seen: one
// call per runner at most. A runner is found by its name, which the
// control plane's attributes make (uses, the number, the key's instance
// id), never by an id the record holds: the instance can write those. A
// runner found gone counts as creditGone says.
func (d *Deps) LookJIT(ctx context.Context, rec *state.Instance, now time.Time, l JITLimits) (int, error) {
	for n := rec.JITSeq; n > rec.JITServed; n-- {
		rn, err := d.GitHub.RunnerNamed(ctx, rec.Owner, state.JITRunnerName(rec.Uses, n, rec.ID))
		switch {
		case github.IsNotFound(err):
			return creditGone(rec, n, now, l), nil
		case err != nil:
			return rec.JITServed, err
		case rn.Busy:
			return n, nil
		}
	}
	return rec.JITServed, nil
}

// creditGone is what runner n, found gone, counts for: removed after its
// job, or removed idle, which GitHub's API does not tell apart. The last
// runner written, gone within IdleMin of its writing, took a job: n. Any
// other may have been removed idle: it lets through only the runner after
// the last written (n - Unused: DecideJIT then allows one more if n is
// the last written, none otherwise), never less than already seen.
func creditGone(rec *state.Instance, n int, now time.Time, l JITLimits) int {
	if n == rec.JITSeq && rec.JITMintedAt != 0 && now.Unix()-rec.JITMintedAt < secs(l.IdleMin) {
		return n
	}
	return max(rec.JITServed, n-l.Unused)
}

// GroupIDs caches the ids of runner groups by owner and name for the life
// of an execution environment: with runner_group set, every mint would
// otherwise page through the owner's runner groups. An id is kept for TTL
// and forgotten when a mint with it fails, so a group renamed or replaced
// is found again.
type GroupIDs struct {
	TTL time.Duration
	// Now is the cache's clock; nil: time.Now.
	Now func() time.Time

	mu  sync.Mutex
	ids map[[2]string]groupID
}

type groupID struct {
	id      int64
	fetched time.Time
}

func (g *GroupIDs) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

func (g *GroupIDs) get(owner, name string) (int64, bool) {
	if g == nil {
		return 0, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.ids[[2]string{owner, name}]
	if !ok || g.now().Sub(e.fetched) >= g.TTL {
		return 0, false
	}
	return e.id, true
}

func (g *GroupIDs) put(owner, name string, id int64) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ids == nil {
		g.ids = map[[2]string]groupID{}
	}
	g.ids[[2]string{owner, name}] = groupID{id: id, fetched: g.now()}
}

// Forget drops the id of owner's group name.
func (g *GroupIDs) Forget(owner, name string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.ids, [2]string{owner, name})
}
