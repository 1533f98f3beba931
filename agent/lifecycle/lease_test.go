package lifecycle

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// sim plays the control plane's clock (t), an agent whose wall clock is
// off by skew and whose monotonic clock started long before, and the store's
// conditional ExtendLease, at a resolution of tick.
type sim struct {
	t, skew, boot time.Duration
	rec           state.Instance
	lease         *leaseClock
	rng           *rand.Rand
}

func newSim(seed uint64, skew time.Duration, rec state.Instance, at time.Duration) *sim {
	return &sim{t: at, skew: skew, boot: 9 * time.Hour, rec: rec, lease: &leaseClock{}, rng: rand.New(rand.NewPCG(seed, 1))}
}

func (s *sim) mono() time.Duration { return s.t - s.boot }
func (s *sim) wall() int64         { return int64((s.t + s.skew) / time.Second) }
func (s *sim) now() int64          { return int64(s.t / time.Second) } // the control plane's, whole seconds

func (s *sim) read() {
	c := s.rec
	s.lease.observe(&c, s.mono())
}

// extend is ExtendLease: its conditions, then the answer the agent sees.
func (s *sim) extend() {
	ext, ok := s.lease.due(s.mono(), s.wall(), "a", func() bool { return true })
	if !ok {
		return
	}
	r := &s.rec
	if r.State != state.Running || r.Threshold != ext.seen || r.Threshold <= r.LeaseAt || r.LeaseCap < ext.next {
		s.lease.refuse(ext.seen)
		return
	}
	r.Threshold, r.Version = ext.next, r.Version+1
	s.read()
}

func running(now int64, step, runtimeCap int64) state.Instance {
	return state.Instance{State: state.Running, Assignment: "a", RunID: "r", Version: 7,
		LeaseAt: now, Threshold: now + step, LeaseCap: now + runtimeCap, LeaseStep: step}
}

func TestTheLeaseNeverLapsesAndStaysNearTheControlPlanesClockWhateverTheAgentClock(t *testing.T) {
	const grace = time.Minute
	for _, step := range []int64{20, 3600} {
		for _, skew := range []time.Duration{-5 * time.Minute, 0, 5 * time.Minute} {
			t.Run(fmt.Sprintf("step %d s, agent clock %s", step, skew), func(t *testing.T) {
				runtimeCap := 6 * 3600 * time.Second
				tick, poll := time.Second, 3*time.Second // production's lease loop and assigned poll
				if step < 60 {
					runtimeCap = 10 * time.Minute
				}
				start := 1_800_000_000*time.Second + 370*time.Millisecond
				s := newSim(uint64(step), skew, running(1_800_000_000, step, int64(runtimeCap/time.Second)), start)
				// The agent reads the running record up to a poll later.
				s.t += time.Duration(s.rng.Int64N(int64(poll)))
				s.read()
				restartAt := start + runtimeCap/3
				nextRead, nextTick := s.t+poll, s.t+tick
				extensions, terminatedAt := 0, time.Duration(0)
				for s.t < start+runtimeCap+2*grace {
					s.t += 50 * time.Millisecond
					if s.t >= restartAt && restartAt != 0 {
						// systemd restarts the agent: it reads its anchors back.
						saved := s.lease.anchors("boot")
						s.lease = &leaseClock{saved: &saved}
						s.t += 2 * time.Second
						s.read()
						restartAt = 0
					}
					if s.t >= nextRead {
						s.read()
						nextRead += poll + time.Duration(s.rng.Int64N(int64(500*time.Millisecond)))
					}
					if s.t >= nextTick {
						before := s.rec.Threshold
						s.extend()
						if s.rec.Threshold != before {
							extensions++
						}
						nextTick += tick
					}
					r := s.rec
					if s.now() < r.LeaseCap && r.Threshold <= s.now() {
						t.Fatalf("at %s after start the lease lapsed (threshold %d, control plane %d)", s.t-start, r.Threshold, s.now())
					}
					if r.Threshold > r.LeaseCap {
						t.Fatalf("threshold %d past the cap %d", r.Threshold, r.LeaseCap)
					}
					if ahead, most := r.Threshold-s.now(), step+1+int64(max(skew, 0)/time.Second); ahead > most {
						t.Fatalf("at %s after start the threshold is %d s ahead, want at most %d", s.t-start, ahead, most)
					}
					if terminatedAt == 0 {
						if _, lapsed := s.lease.lapsed(s.mono(), time.Unix(s.wall(), 0), grace, func(*state.Instance) bool { return true }); lapsed {
							terminatedAt = s.t
						}
					}
				}
				capAt := time.Duration(s.rec.LeaseCap) * time.Second
				switch {
				case s.rec.Threshold != s.rec.LeaseCap:
					t.Fatalf("threshold %d at the end, want the cap %d", s.rec.Threshold, s.rec.LeaseCap)
				case terminatedAt == 0:
					t.Fatal("the agent never gave the instance up after the cap")
				case terminatedAt < capAt+grace || terminatedAt > capAt+grace+2*poll+2*time.Second:
					t.Fatalf("the agent gave the instance up %s after the cap, want the grace (%s) and at most a few seconds", terminatedAt-capAt, grace)
				}
				// A fast clock takes the lease its skew ahead at once.
				if want := int(int64((runtimeCap-max(skew, 0))/time.Second)/step) - 1; extensions < want {
					t.Fatalf("%d extensions in %s of %d s steps", extensions, runtimeCap, step)
				}
			})
		}
	}
}

func TestALeaseIsCountedFromItsFirstSightNotByTheAgentsWallClock(t *testing.T) {
	const grace = 10 * time.Second
	holding := func(*state.Instance) bool { return true }
	notHolding := func(*state.Instance) bool { return false }
	wall := time.Unix(1_800_000_000, 0).Add(5 * time.Minute) // fast

	l := &leaseClock{}
	created := state.Instance{State: state.Created, Assignment: "a", RunID: "r", Version: 1, LeaseAt: 1_800_000_000, Threshold: 1_800_000_000 + 120}
	l.observe(&created, 100*time.Second)
	if _, lapsed := l.lapsed(100*time.Second+129*time.Second, wall, grace, holding); lapsed {
		t.Fatal("a 120 s lease lapsed 129 s after its first sight with a grace of 10 s")
	}
	if _, lapsed := l.lapsed(100*time.Second+131*time.Second, wall, grace, holding); !lapsed {
		t.Fatal("a 120 s lease held 131 s after its first sight")
	}

	// Marked running in the same second: a new lease, not an extension.
	run := running(1_800_000_000, 20, 600)
	run.Version = 4
	l.observe(&run, 110*time.Second)
	if ext, ok := l.due(110*time.Second, wall.Unix()-300, "a", func() bool { return true }); ok {
		t.Fatalf("extension %+v due at the first sight of a running lease", ext)
	}
	if _, lapsed := l.lapsed(110*time.Second+31*time.Second, wall, grace, notHolding); !lapsed {
		t.Fatal("a 20 s running lease whose runner is gone held 31 s after its first sight")
	}
	if why, lapsed := l.lapsed(110*time.Second+31*time.Second, wall, grace, holding); lapsed {
		t.Fatalf("a running lease whose runner is alive lapsed before its cap: %s", why)
	}
	if _, lapsed := l.lapsed(110*time.Second+611*time.Second, wall, grace, holding); !lapsed {
		t.Fatal("a running lease held past its cap and the grace")
	}

	// An older read, racing an extension, changes nothing.
	stale := created
	l.observe(&stale, 115*time.Second)
	if l.current().State != state.Running {
		t.Fatal("an older record replaced a newer one")
	}

	// The control plane ends the lease: after the grace, runner or not.
	expired := run
	expired.Version, expired.LeaseAt, expired.Threshold = 9, 1_800_000_050, 1_800_000_049
	l.observe(&expired, 200*time.Second)
	if _, lapsed := l.lapsed(200*time.Second+8*time.Second, wall, grace, holding); lapsed {
		t.Fatal("expired lease ended before the grace")
	}
	if _, lapsed := l.lapsed(200*time.Second+10*time.Second, wall, grace, holding); !lapsed {
		t.Fatal("expired lease held after the grace")
	}

	// A record from before leases carried leaseAt: the wall clock decides.
	old := &leaseClock{}
	old.observe(&state.Instance{State: state.Idle, Version: 1, Threshold: 1_800_000_100}, 0)
	if _, lapsed := old.lapsed(time.Hour, time.Unix(1_800_000_100, 0).Add(grace-time.Second), grace, holding); lapsed {
		t.Fatal("old record lapsed before threshold + grace by its wall clock")
	}
	if _, lapsed := old.lapsed(0, time.Unix(1_800_000_100, 0).Add(grace+time.Second), grace, holding); !lapsed {
		t.Fatal("old record held after threshold + grace by its wall clock")
	}
}
