package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// Single flight of the scheduled functions, without reserved concurrency
// (which new accounts cannot grant: their unreserved concurrency may not
// drop below its minimum).
//
// An invocation holds the function's lease item for SingleFlightTTL and
// renews it every SingleFlightTTL/3 while it runs, then releases it. A
// holder that stops renewing — killed, frozen, or whose release write
// failed — blocks the next invocations for at most SingleFlightTTL, never
// for the rest of its (up to 15-minute) deadline. If a renewal loses the
// lease, two invocations overlap for a while: that is safe, since every
// transition is a conditional write, only wasteful.
var SingleFlightTTL = 30 * time.Second

// SingleFlight takes the named lease (state.Store.AcquireLease) for this
// invocation and keeps it until release is called. ok is false when another
// invocation holds it.
func (d *Deps) SingleFlight(ctx context.Context, name string) (release func(), ok bool, err error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	holder := hex.EncodeToString(b[:])
	ttl := SingleFlightTTL
	ok, err = d.Store.AcquireLease(ctx, name, holder, d.Store.Now().Add(ttl))
	if err != nil || !ok {
		return func() {}, ok, err
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			held, err := d.Store.AcquireLease(ctx, name, holder, d.Store.Now().Add(ttl))
			switch {
			case err != nil && ctx.Err() == nil && d.Log != nil:
				d.Log.Warn("renewing the single-flight lease failed; tried again shortly", "lease", name, "err", err)
			case err == nil && !held && d.Log != nil:
				d.Log.Warn("the single-flight lease was taken over (a renewal came too late); runs may overlap until this one ends", "lease", name)
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			<-stopped
			// The invocation's context may be done; the release must still go.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := d.Store.ReleaseLease(rctx, name, holder); err != nil && d.Log != nil {
				d.Log.Warn("releasing the single-flight lease failed; it lapses by itself", "lease", name, "err", err, "within", ttl.String())
			}
		})
	}, true, nil
}
