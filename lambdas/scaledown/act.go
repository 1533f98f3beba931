package scaledown

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Limits of one run's work.
const (
	// Concurrency bounds the actions in flight. Each is a conditional write
	// and maybe a GitHub deletion: done one at a time, a few hundred
	// retirements would fill the function's 300 s.
	Concurrency = 16
	// TerminateBatch is the most ids of one TerminateInstances call; a
	// batch goes when full or BatchWait after its first id, so instances
	// follow their records within a second instead of at the end of the run.
	TerminateBatch = 100
	BatchWait      = 500 * time.Millisecond
	// terminateCalls bounds the TerminateInstances calls in flight.
	terminateCalls = 4
)

// stopMargin is how long before its deadline a run starts nothing new: the
// actions in flight get the first half of it, the last EC2 batch the
// second (30 s of the function's 300 s).
func stopMargin(left time.Duration) time.Duration {
	return min(max(left/10, 3*time.Second), 30*time.Second)
}

// executor carries out decisions within the run's deadline.
type executor struct {
	d    *controlplane.Deps
	ec2  EC2
	gh   controlplane.GitHub
	in   Input
	stop time.Time // no action starts after it; zero: no deadline
	term *terminator

	mu     sync.Mutex
	errors []string
}

func (e *executor) fail(msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errors = append(e.errors, msg)
}

func (e *executor) late() bool { return !e.stop.IsZero() && time.Now().After(e.stop) }

// each runs fn(i) for i in order, Concurrency at a time; an item whose turn
// comes after the stop time (or once ctx is done) is not started. It
// returns which were started.
func (e *executor) each(ctx context.Context, n int, fn func(i int)) []bool {
	started := make([]bool, n)
	var g errgroup.Group
	g.SetLimit(Concurrency)
	for i := range n {
		g.Go(func() error {
			// Checked when the slot is free, not when queued: a run
			// waiting on slow calls must not start more past its stop.
			if e.late() || ctx.Err() != nil {
				return nil
			}
			started[i] = true
			fn(i)
			return nil
		})
	}
	g.Wait()
	return started
}

// renew extends the lease of an idle instance kept within the quota; only
// then are its stale runners removed (the renewal proves the record still
// idle for the assignment seen).
func (e *executor) renew(ctx context.Context, dec Decision) Decision {
	rec := e.in.Records[dec.InstanceID]
	p := e.in.Pools[dec.Pool]
	if _, err := storeOf(e.d).Renew(ctx, rec.Ref(), state.D(p.Timings.IdleTTL)); err != nil {
		dec.Reason += "; lease not renewed: " + err.Error()
		return dec
	}
	dec.Reason += e.deregister(ctx, dec)
	return dec
}

// retire marks the record terminated with a conditional write on the
// assignment seen (a claim since wins and the instance is kept), then
// hands the instance to the terminator, then deletes the runners of its
// earlier uses. It reports whether the instance goes.
func (e *executor) retire(ctx context.Context, dec Decision) (Decision, bool) {
	rec := e.in.Records[dec.InstanceID]
	if rec != nil && rec.State != state.Terminated {
		assignment := dec.Assignment
		if assignment == "" {
			assignment = rec.Assignment
		}
		if _, err := storeOf(e.d).Terminate(ctx, rec.Key, state.Termination{Assignment: assignment, Reason: "scale-down: " + dec.Reason}); err != nil {
			if state.ClauseOf(err) != "" {
				dec.Reason += "; kept: record changed meanwhile: " + err.Error()
			} else {
				dec.Reason += "; kept: record not written: " + err.Error()
			}
			return dec, false
		}
	}
	e.term.add(dec.InstanceID)
	dec.Reason += e.deregister(ctx, dec)
	return dec, true
}

// deregister deletes the decision's runners, whose record write has
// succeeded. A runner GitHub still sees busy, or a deletion that fails, is
// left for the ghost sweep of a later run; the instance goes anyway.
func (e *executor) deregister(ctx context.Context, dec Decision) string {
	var notes []string
	for _, id := range dec.Deregister {
		err := e.gh.DeleteRunner(ctx, dec.Owner, id)
		switch {
		case err == nil:
			notes = append(notes, fmt.Sprintf("stale runner %d removed", id))
		case github.IsBusy(err):
			notes = append(notes, fmt.Sprintf("runner %d busy on GitHub: left for the ghost sweep", id))
		default:
			notes = append(notes, fmt.Sprintf("runner %d not removed (%v): left for the ghost sweep", id, err))
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return "; " + strings.Join(notes, "; ")
}

// sweep deletes the ghost runners among the candidates, after reading
// their instances' records again.
func (e *executor) sweep(ctx context.Context, candidates []Ghost) []Ghost {
	if len(candidates) == 0 || e.late() {
		return nil
	}
	ids := make([]string, len(candidates))
	for i, c := range candidates {
		ids[i] = c.InstanceID
	}
	recs, err := storeOf(e.d).ByInstanceID(ctx, ids, e.in.roles())
	if err != nil {
		e.fail("ghost sweep: " + err.Error())
		return nil
	}
	inEC2 := make(map[string]bool, len(e.in.Instances))
	for _, inst := range e.in.Instances {
		inEC2[inst.ID] = true
	}
	var ghosts []Ghost
	for _, c := range candidates {
		if g, ok := ConfirmGhost(c, recs[c.InstanceID], inEC2[c.InstanceID]); ok {
			ghosts = append(ghosts, g)
		}
	}
	deleted := make([]bool, len(ghosts))
	e.each(ctx, len(ghosts), func(i int) {
		g := ghosts[i]
		err := e.gh.DeleteRunner(ctx, g.Owner, g.RunnerID)
		switch {
		case err == nil:
			deleted[i] = true
		case !github.IsBusy(err): // busy since the listing: next run
			e.fail(fmt.Sprintf("ghost runner %s of %s: %v", g.Name, g.Owner, err))
		}
	})
	var out []Ghost
	for i, g := range ghosts {
		if deleted[i] {
			out = append(out, g)
		}
	}
	return out
}

// terminator terminates in EC2, in batches and as the run goes, the
// instances whose records are marked, so that a run cut off leaves at most
// the last batch's instances alive with their records terminated; the next
// run terminates those (decidePool).
type terminator struct {
	ec2 EC2
	ids chan string
	g   errgroup.Group
	end chan struct{}

	mu     sync.Mutex
	errors []error
}

func startTerminator(ctx context.Context, ec2 EC2) *terminator {
	t := &terminator{ec2: ec2, ids: make(chan string, TerminateBatch), end: make(chan struct{})}
	t.g.SetLimit(terminateCalls)
	go t.loop(ctx)
	return t
}

func (t *terminator) add(id string) { t.ids <- id }

func (t *terminator) loop(ctx context.Context) {
	defer close(t.end)
	var batch []string
	var due <-chan time.Time
	flush := func() {
		if len(batch) > 0 {
			ids := batch
			t.g.Go(func() error {
				if _, err := t.ec2.Terminate(ctx, ids); err != nil {
					t.mu.Lock()
					t.errors = append(t.errors, err)
					t.mu.Unlock()
				}
				return nil
			})
		}
		batch, due = nil, nil
	}
	for {
		select {
		case id, ok := <-t.ids:
			if !ok {
				flush()
				return
			}
			batch = append(batch, id)
			if len(batch) == 1 {
				due = time.After(BatchWait)
			}
			if len(batch) >= TerminateBatch {
				flush()
			}
		case <-due:
			flush()
		}
	}
}

// close sends the last batch and waits for every call.
func (t *terminator) close() error {
	close(t.ids)
	<-t.end
	t.g.Wait()
	return errors.Join(t.errors...)
}
