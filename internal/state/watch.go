package state

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// recordReader is what a Watcher reads: Instances, or a Store.
type recordReader interface {
	Get(ctx context.Context, key Key) (*Instance, error)
	GetMany(ctx context.Context, keys []Key) (map[Key]*Instance, error)
}

// Watcher serves the record reads of concurrent signal waits with one
// batch read per interval for every record waited on: a provision or a
// release of ten instances reads ten records with one request, not ten.
// A batch read that fails (a throttled key stays unprocessed) is followed
// by a read of each record on its own, so one hot record delays no other
// wait. Safe for concurrent use; it reads only while someone waits.
type Watcher struct {
	s     recordReader
	every time.Duration

	mu      sync.Mutex
	waiting map[Key][]chan readResult // by record key
	reading bool                      // the read loop runs
}

type readResult struct {
	inst *Instance
	err  error
}

// NewWatcher returns a Watcher of s that reads every interval (1 s if 0).
func NewWatcher(s recordReader, every time.Duration) *Watcher {
	if every <= 0 {
		every = time.Second
	}
	return &Watcher{s: s, every: every, waiting: map[Key][]chan readResult{}}
}

// next returns the record at the next read.
func (w *Watcher) next(ctx context.Context, id Key) (*Instance, error) {
	ch := make(chan readResult, 1)
	w.mu.Lock()
	w.waiting[id] = append(w.waiting[id], ch)
	if !w.reading {
		w.reading = true
		go w.loop()
	}
	w.mu.Unlock()
	select {
	case r := <-ch:
		return r.inst, r.err
	case <-ctx.Done():
		w.mu.Lock()
		chans := w.waiting[id]
		for i, c := range chans {
			if c == ch {
				w.waiting[id] = append(chans[:i:i], chans[i+1:]...)
				break
			}
		}
		if len(w.waiting[id]) == 0 {
			delete(w.waiting, id)
		}
		w.mu.Unlock()
		return nil, ctx.Err()
	}
}

// loop reads the records waited on, answers their waits, and sleeps an
// interval, until no one waits. Its reads are bounded by the interval,
// not by any caller's context: a caller that gives up just leaves.
func (w *Watcher) loop() {
	for {
		w.mu.Lock()
		if len(w.waiting) == 0 {
			w.reading = false
			w.mu.Unlock()
			return
		}
		batch := w.waiting
		w.waiting = map[Key][]chan readResult{}
		w.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), max(w.every, 5*time.Second))
		ids := make([]Key, 0, len(batch))
		for id := range batch {
			ids = append(ids, id)
		}
		found, err := w.s.GetMany(ctx, ids)
		for id, chans := range batch {
			var r readResult
			switch {
			case err != nil:
				r.inst, r.err = w.s.Get(ctx, id)
			case found[id] == nil:
				r.err = fmt.Errorf("instance record %s: %w", id, ErrNotFound)
			default:
				r.inst = found[id]
			}
			for i, ch := range chans {
				if i > 0 && r.inst != nil {
					copied := *r.inst // each wait gets its own
					r.inst = &copied
				}
				ch <- r
			}
		}
		cancel()
		time.Sleep(w.every)
	}
}

// WaitSignal waits until the ok signal answers assignment. It returns a
// *SignalFailedError at once when the failed signal answers it, a
// *ConditionError when the record moved to another assignment or was
// terminated (the wait can never succeed), and the context's error at the
// deadline. Transient read errors are retried until the deadline.
//
// A spot interruption notice (UD_INTERRUPTED) for the assignment also ends
// the wait at once, as a *SignalFailedError: the instance is going away.
func (w *Watcher) WaitSignal(ctx context.Context, key Key, assignment, ok, failed string) (*Instance, error) {
	var lastErr error
	for {
		inst, err := w.next(ctx, key)
		switch {
		case ctx.Err() != nil:
			if lastErr != nil {
				return nil, errors.Join(ctx.Err(), lastErr)
			}
			return nil, fmt.Errorf("wait for %s of %s: %w", ok, key, ctx.Err())
		case IsNotFound(err):
			return nil, &ConditionError{Key: string(key), Transition: "wait " + ok, Clause: ClauseExists, Detail: "no such record"}
		case err != nil:
			lastErr = err
		case inst.State == Terminated:
			return inst, &ConditionError{Key: string(inst.Key), Transition: "wait " + ok, Clause: ClauseState, Detail: "instance is terminated", Current: inst}
		case inst.Assignment != assignment:
			return inst, &ConditionError{Key: string(inst.Key), Transition: "wait " + ok, Clause: ClauseAssignment,
				Detail: fmt.Sprintf("assignment is %s, want %s", inst.Assignment, assignment), Current: inst}
		default:
			if _, done := inst.SignalFor(ok); done {
				return inst, nil
			}
			if sig, bad := inst.SignalFor(failed); bad && failed != "" {
				return inst, &SignalFailedError{InstanceID: inst.ID, Signal: failed, Detail: sig.Detail}
			}
			if sig, gone := inst.SignalFor(SignalInterrupted); gone {
				return inst, &SignalFailedError{InstanceID: inst.ID, Signal: SignalInterrupted, Detail: sig.Detail}
			}
		}
	}
}
