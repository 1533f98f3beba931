package provision

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// waitAll waits for every instance's UD_REG_OK and moves it to running.
// An instance that fails (a FAILED signal, a spot interruption notice, its
// lease running out) is given up and replaced at once by
// a new one, once per requested instance, while a boot still fits the
// deadline. A failure that cannot be replaced ends the other waits: the
// provision fails and rolls back.
func (p *provisioner) waitAll(ctx context.Context, reg *state.Registration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		m   *member
		err error
	}
	results := make(chan result)
	pending := 0
	wait := func(m *member) {
		pending++
		go func() { results <- result{m, p.waitOne(ctx, m)} }()
	}
	go p.watchLaunches(ctx)
	replaceable := map[string]bool{} // replacements are not replaced again
	for _, m := range p.members() {
		if !m.done {
			replaceable[m.inst.ID] = true
			wait(m)
		}
	}
	var failed []error
	for pending > 0 {
		r := <-results
		pending--
		if r.err == nil {
			continue
		}
		p.log.Warn("instance failed to become ready", "instanceId", r.m.inst.ID, "err", r.err)
		p.forget(r.m.inst.ID)
		// Given back in the background: a failed provision marks its run
		// failed before it waits for this (rollback).
		p.giving.Add(1)
		go func() { defer p.giving.Done(); p.giveUp(r.m, r.err) }()
		err := fmt.Errorf("%s: %w", r.m.inst.ID, r.err)
		dl, _ := ctx.Deadline()
		if len(failed) > 0 || !replaceable[r.m.inst.ID] || errors.Is(r.err, errReleased) || ctx.Err() != nil || time.Until(dl) < state.D(p.req.pool.Timings.BootTime) {
			failed = append(failed, err)
			cancel()
			continue
		}
		fresh, cerr := p.launch(ctx, 1, reg)
		for _, m := range fresh {
			wait(m)
		}
		if cerr != nil {
			failed = append(failed, fmt.Errorf("%w; replacing it failed: %w", err, cerr))
			cancel()
			continue
		}
		p.log.Info("replacing a failed instance", "failed", r.m.inst.ID, "replacement", fresh[0].inst.ID)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d instances did not become ready: %w", len(failed), p.req.count, errors.Join(failed...))
	}
	return nil
}

var errReleased = errors.New("the run was released")

// launchWatchEvery is how often provision asks EC2 about the instances it
// waits for: an instance EC2 ends at launch (a root volume whose KMS key
// the launch role cannot use, capacity taken back) never signals, and
// waiting out its created lease would hold the workflow for minutes.
const launchWatchEvery = 10 * time.Second

// launchEndedError: EC2 ended an instance provision was waiting for.
type launchEndedError struct{ id, state string }

func (e *launchEndedError) Error() string {
	msg := fmt.Sprintf("EC2 ended instance %s while it booted: %s", e.id, e.state)
	if strings.Contains(e.state, "Client.InternalError") {
		msg += " (often a root volume encrypted with a KMS key the instance's launch may not use: check the account's default EBS key and the pool's kms_key_arn)"
	}
	return msg
}

// watchLaunches asks EC2, every launchWatchEvery while ctx lives, which of
// the instances still waited for it has stopped or terminated, and ends
// their waits with EC2's reason, so they are given up and replaced at once.
// EC2 failing to answer changes nothing: the lease still bounds the wait.
func (p *provisioner) watchLaunches(ctx context.Context) {
	t := time.NewTicker(launchWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		stops := map[string]context.CancelCauseFunc{}
		var ids []string
		p.mu.Lock()
		for id, m := range p.mine {
			if !m.done && m.stop != nil {
				stops[id] = m.stop
				ids = append(ids, id)
			}
		}
		p.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		ended, err := p.fleet.Ended(ctx, ids)
		if err != nil {
			p.log.Info("could not ask EC2 about the instances waited for", "err", err)
			continue
		}
		for id, st := range ended {
			stops[id](&launchEndedError{id: id, state: st})
		}
	}
}

func (p *provisioner) waitOne(ctx context.Context, m *member) error {
	lease := time.Unix(m.inst.Threshold, 0)
	wctx, cancel := context.WithDeadline(ctx, lease)
	defer cancel()
	wctx, stop := context.WithCancelCause(wctx)
	defer stop(nil)
	p.mu.Lock()
	m.stop = stop
	p.mu.Unlock()
	err := p.waitReady(wctx, ctx, m)
	if cause := context.Cause(wctx); err != nil && errors.As(cause, new(*launchEndedError)) {
		return cause
	}
	return err
}

// waitReady is waitOne's wait within wctx (the lease, or EC2 ending the
// instance), and the run's move to running within ctx.
func (p *provisioner) waitReady(wctx, ctx context.Context, m *member) error {
	// The lease bounds the wait. An agent's silence is not judged here: its
	// writes (heartbeats and the awaited signal alike) can be throttled for
	// longer than the stale limit while it registers, and giving up on an
	// instance whose runner registered leaves that runner taking the run's
	// jobs on an instance the run was not given. Refresh expires idle
	// instances whose agent went silent, so dead ones are rarely claimed.
	if p.req.pool.JIT() && m.inst.JITSeq == 0 {
		// The instance's first single-job runner, written into its
		// record (MintJIT deletes it again if the write loses).
		inst, err := p.d.MintJIT(wctx, m.inst, 1, p.label, p.jitGroup)
		if err != nil {
			return fmt.Errorf("its first just-in-time runner: %w", err)
		}
		p.mu.Lock()
		m.inst, m.configured = inst, time.Since(p.start).Seconds()
		p.mu.Unlock()
	}
	if _, err := p.d.Watcher().WaitSignal(wctx, m.inst.Key, m.inst.Assignment, state.SignalRegOK, state.SignalRegFailed); err != nil {
		return err
	}
	run, err := storeOf(p.d).GetRun(ctx, p.req.RunID)
	if err != nil {
		return err
	}
	if run.Status == state.RunReleased {
		return errReleased
	}
	inst, err := storeOf(p.d).MarkRunning(ctx, m.inst.Ref(), state.D(p.req.pool.Timings.MaxRuntime), state.D(p.req.pool.Timings.RuntimeCap))
	if err != nil {
		return err
	}
	p.mu.Lock()
	m.inst, m.done, m.ready = inst, true, time.Since(p.start).Seconds()
	p.mu.Unlock()
	return nil
}

// runnerName is the name of an instance's runner during provision: its
// first just-in-time runner, or the one config.sh registers.
func (p *provisioner) runnerName(inst *state.Instance) string {
	if p.req.pool.JIT() {
		return state.JITRunnerName(inst.Uses, 1, inst.ID)
	}
	return state.RunnerName(inst.Uses, inst.ID)
}

// giveUp retires a member that will not become ready, within the cleanup
// deadline. Its runners go first (withdraw): an agent whose note was never
// seen (its record throttled, say) may have registered, and that runner
// would take the run's jobs on an instance the run is not given. If GitHub
// shows one running a job of the run already, the instance is adopted
// instead: ending it would kill that job. Then a created instance is
// terminated (even when its record cannot be read: nothing but this
// provision holds a created instance of its assignment); a claimed one
// goes back to the pool only once its agent says it is clean, unless EC2
// is taking it back (then it is expired).
func (p *provisioner) giveUp(m *member, why error) {
	ctx := p.cleanup
	p.forget(m.inst.ID)
	err := p.withdraw(ctx, m)
	if github.IsBusy(err) {
		p.keepBusy(ctx, m)
		return
	}
	if err != nil {
		p.log.Warn("give up instance: its runners could not all be deleted", "instanceId", m.inst.ID, "err", err)
	}
	// The run item says it is no longer the run's, so no just-in-time
	// runner of the run is minted for it even where its record cannot be
	// moved on below (a chaos run saw one take a job of the run).
	if gerr := storeOf(p.d).GiveUpRunInstance(ctx, p.req.RunID, m.inst.ID); gerr != nil {
		p.log.Warn("give up instance: the run item does not say so", "instanceId", m.inst.ID, "err", gerr)
	}
	cur, err := storeOf(p.d).Get(ctx, m.inst.Key)
	if err != nil {
		if m.inst.State == state.Created {
			p.terminate(ctx, m.inst, "did not become ready; its record could not be read")
			return
		}
		p.log.Warn("give up instance: read failed; its lease ends it", "instanceId", m.inst.ID, "err", err)
		p.watchRunner(ctx, m)
		return
	}
	var sf *state.SignalFailedError
	gone := errors.As(why, &sf) && sf.Signal == state.SignalInterrupted
	switch {
	case cur.State == state.Claimed && cur.Assignment == m.inst.Assignment && gone:
		p.d.Expire(ctx, cur.Ref(), "given up: "+why.Error())
	case cur.State == state.Claimed && cur.Assignment == m.inst.Assignment:
		removal, rerr := p.d.RemovalFor(ctx, cur.Owner)
		if rerr != nil {
			p.d.Expire(ctx, cur.Ref(), rerr.Error())
			return
		}
		idle, uerr := storeOf(p.d).Unclaim(ctx, cur.Ref(), state.D(p.req.pool.Timings.IdleTTL), removal)
		if uerr != nil {
			// Its lease ran out (the usual reason to give up) or the write
			// failed: the agent never hears it was given up. Refresh ends
			// the instance; until then its runner must take no job.
			p.watchRunner(ctx, m)
			return
		}
		// Repool expires the instance when its agent does not confirm in
		// time; that must happen before the invocation ends.
		p.d.Repool(ctx, idle, p.req.pool, withinCleanup(ctx, 30*time.Second))
	case cur.State == state.Created && cur.Assignment == m.inst.Assignment:
		p.terminate(ctx, cur, "did not become ready")
	case cur.State == state.Running && cur.RunID == p.req.RunID:
		p.d.ReleaseInstance(ctx, p.req.RunID, cur.Key)
	}
}

// withdraw deletes every runner of a given-up member: the first, by the
// name provision knows it by (the one config.sh registers has no id the
// control plane wrote), and every one its record names
// (controlplane.RunnerIDs), read again now. The agent may have asked for
// and been given another just-in-time runner while the instance was
// claimed (its first exited before it was marked running): the member's
// copy of the record predates it, and that runner, left registered with
// the run's label, would take the run's jobs on an instance the run is not
// given. A busy runner is among the errors (github.IsBusy); every runner
// is tried whatever another's delete said.
func (p *provisioner) withdraw(ctx context.Context, m *member) error {
	err := p.d.Unregister(ctx, p.req.Owner, p.runnerName(m.inst))
	rec, gerr := storeOf(p.d).Get(ctx, m.inst.Key)
	if gerr != nil || rec.Assignment != m.inst.Assignment {
		// Unreadable, or moved on (its runners are no longer this
		// assignment's): those provision knows of.
		rec = m.inst
	}
	return errors.Join(err, p.d.DeleteInstanceRunners(ctx, rec))
}

// watchRunner keeps withdrawing the runners of a given-up claimed instance
// whose record could not be moved on: its agent, slowed by the same trouble
// (a throttled record), may still register after giveUp looked (a
// 200-workflow chaos run saw one register 6 s later), and would take the
// run's jobs. Bounded by 30 s and the cleanup deadline; after that the
// instance's lease and refresh end it.
func (p *provisioner) watchRunner(ctx context.Context, m *member) {
	until := time.Now().Add(withinCleanup(ctx, 30*time.Second))
	// giveUp has just looked: the first look is one interval on.
	for time.Now().Add(2 * time.Second).Before(until) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		if err := p.withdraw(ctx, m); github.IsBusy(err) {
			p.keepBusy(ctx, m)
			return
		}
	}
}

// withinCleanup bounds a wait of giveUp by the cleanup deadline, less the
// few seconds what follows the wait needs.
func withinCleanup(ctx context.Context, d time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return min(d, time.Until(dl)-3*time.Second)
	}
	return d
}

// keepBusy keeps a given-up instance whose runner runs a job of the run: it
// becomes running for the run (release gives it back with the others). If
// the record cannot be written, its lease ends it, as it would have.
func (p *provisioner) keepBusy(ctx context.Context, m *member) {
	t := p.req.pool.Timings
	if _, err := storeOf(p.d).Adopt(ctx, m.inst.Ref(), state.D(t.MaxRuntime), state.D(t.RuntimeCap)); err != nil {
		p.log.Error("adopt an instance whose runner runs a job of the run", "instanceId", m.inst.ID, "err", err)
		return
	}
	p.log.Warn("adopted an instance given up while its runner runs a job of the run", "instanceId", m.inst.ID)
}

func (p *provisioner) terminate(ctx context.Context, inst *state.Instance, why string) {
	if err := p.fleet.Terminate(ctx, []string{inst.ID}); err != nil {
		p.d.Expire(ctx, inst.Ref(), why+"; terminate failed: "+err.Error())
		return
	}
	if _, err := storeOf(p.d).Terminate(ctx, inst.Key, state.Termination{Assignment: inst.Assignment, Reason: why}); err != nil && state.ClauseOf(err) == "" {
		p.log.Warn("mark terminated", "instanceId", inst.ID, "err", err)
	}
}

// rollback gives back everything this provision holds after it failed,
// once the instances already being given back are done.
func (p *provisioner) rollback() {
	p.giving.Wait()
	var wg sync.WaitGroup
	for _, m := range p.members() {
		wg.Add(1)
		go func() { defer wg.Done(); p.giveUp(m, errors.New("the provision failed")) }()
	}
	wg.Wait()
}
