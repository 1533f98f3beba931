package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"
)

// singleFlightFor bounds a lease when the invocation has no deadline
// (tests): Lambda's own maximum.
const singleFlightFor = 15 * time.Minute

// SingleFlight takes the named lease (state.Store.AcquireLease) for this
// invocation until its deadline, so that a scheduled function never runs
// twice at once without reserved concurrency. ok is false when another
// invocation holds it; release gives it back (call it when done).
func (d *Deps) SingleFlight(ctx context.Context, name string) (release func(), ok bool, err error) {
	var b [8]byte
	rand.Read(b[:])
	holder := hex.EncodeToString(b[:])
	until := d.Store.Now().Add(singleFlightFor)
	if deadline, has := ctx.Deadline(); has {
		until = deadline
	}
	ok, err = d.Store.AcquireLease(ctx, name, holder, until)
	if err != nil || !ok {
		return func() {}, ok, err
	}
	return func() {
		// The invocation's context may be done; the release must still go.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := d.Store.ReleaseLease(rctx, name, holder); err != nil && d.Log != nil {
			d.Log.Warn("releasing the single-flight lease failed; it ends at the invocation's deadline", "lease", name, "err", err)
		}
	}, true, nil
}
