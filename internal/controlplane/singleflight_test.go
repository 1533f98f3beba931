package controlplane

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state/statetest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

var env *awstest.Moto

func TestMain(m *testing.M) { os.Exit(awstest.Main(m, &env)) }

// The single-flight lease of the scheduled functions (issue 15 item 4): held
// past its time-to-live while the holder runs, free at once when it is
// released, and free within the time-to-live when its holder stops (killed,
// or its release write lost) — never for the rest of the holder's deadline.
func TestSingleFlightIsHeldWhileItsHolderRunsAndLapsesSoonAfterItStops(t *testing.T) {
	ttl := SingleFlightTTL
	SingleFlightTTL = time.Second
	t.Cleanup(func() { SingleFlightTTL = ttl })
	d := &Deps{Store: statetest.NewStore(t, env)}
	ctx := context.Background()
	try := func(who string) (func(), bool) {
		t.Helper()
		release, ok, err := d.SingleFlight(ctx, "refresh")
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		return release, ok
	}

	releaseA, ok := try("a")
	if !ok {
		t.Fatal("a could not take a free lease")
	}
	time.Sleep(3 * SingleFlightTTL) // renewed all along
	if _, ok := try("b"); ok {
		t.Fatal("b took the lease while a was running, past its time-to-live: a did not renew it")
	}
	releaseA()
	releaseB, ok := try("b")
	if !ok {
		t.Fatal("b could not take the lease a released")
	}

	releaseB()

	// An invocation dies holding it: its renewals stop with its context,
	// and its release never runs.
	dying, kill := context.WithCancel(ctx)
	if _, ok, err := d.SingleFlight(dying, "refresh"); err != nil || !ok {
		t.Fatalf("the dying holder: ok %v, err %v", ok, err)
	}
	kill()
	if _, ok := try("c"); ok {
		t.Fatal("c took the lease at once: a dead holder's lease should last until its time-to-live")
	}
	time.Sleep(SingleFlightTTL + 2*time.Second) // the lease's time is kept in whole seconds
	if _, ok := try("c"); !ok {
		t.Fatal("c could not take the lease of a dead holder after its time-to-live")
	}
}
