package state

import (
	"strings"
	"testing"
	"time"
)

func TestAStoppedInstanceIsStartedForARunAsALaunchUnderANewAssignment(t *testing.T) {
	s, clk := newStore(t)
	p := pooled(t, s, "i-stop1")
	st, err := s.Stop(ctx, p.Ref(), time.Hour)
	must(t, err)
	if st.State != Stopped || st.PoolState != PoolState(testPool, Stopped) || st.Assignment == p.Assignment || st.StoppedAt == 0 || st.PooledAt != 0 {
		t.Fatalf("stopped record = %+v", st)
	}
	if st.Threshold != clk.Now().Unix()+3600 || st.LeaseLimit != st.Threshold {
		t.Fatalf("stopped lease = %d (limit %d), want the keep time from now", st.Threshold, st.LeaseLimit)
	}
	if _, err := s.Claim(ctx, st.Key, claimReq("r-claim")); ClauseOf(err) != ClauseState {
		t.Fatalf("claim of a stopped instance: %v, want refused on its state", err)
	}
	clk.Add(10 * time.Minute)
	started, err := s.Start(ctx, st.Key, claimReq("r-start"), 10*time.Minute)
	must(t, err)
	if started.State != Created || started.RunID != "r-start" || started.Assignment == st.Assignment || started.Uses != p.Uses+1 {
		t.Fatalf("started record = %+v", started)
	}
	if started.StartedAt != clk.Now().Unix() || started.Heartbeats != 0 || started.StoppedAt != 0 {
		t.Fatalf("started record keeps the earlier boot: startedAt %d heartbeats %d stoppedAt %d", started.StartedAt, started.Heartbeats, started.StoppedAt)
	}
	if started.NeverBeat(clk.Now().Add(time.Minute), 5*time.Minute) {
		t.Fatal("a just-started instance is judged by its first launch, not its start")
	}
	if why := LifeNotGiven(started, DefaultTimings(), clk.Now()); why != "" {
		t.Fatalf("a started record reads as forged: %s", why)
	}
}

func TestStopAndStartRefuseWhatTheyMustNotTouch(t *testing.T) {
	s, clk := newStore(t)
	cases := []struct {
		name string
		want Clause
		run  func(t *testing.T) error
	}{
		{"stop: a running instance", ClauseState, func(t *testing.T) error {
			r := running(t, s, "i-s1", "r1")
			_, err := s.Stop(ctx, r.Ref(), time.Hour)
			return err
		}},
		{"stop: a claimed instance", ClauseState, func(t *testing.T) error {
			p := pooled(t, s, "i-s2")
			c, err := s.Claim(ctx, p.Key, claimReq("r2"))
			must(t, err)
			_, err = s.Stop(ctx, c.Ref(), time.Hour)
			return err
		}},
		{"stop: an idle instance not yet clean", ClauseSignal, func(t *testing.T) error {
			r := running(t, s, "i-s3", "r3")
			idle, err := s.Release(ctx, r.Ref(), "r3", 15*time.Minute, nil)
			must(t, err)
			_, err = s.Stop(ctx, idle.Ref(), time.Hour)
			return err
		}},
		{"stop: an idle instance claimed since it was read", ClauseAssignment, func(t *testing.T) error {
			p := pooled(t, s, "i-s4")
			_, err := s.Claim(ctx, p.Key, claimReq("r4"))
			must(t, err)
			_, err = s.Stop(ctx, p.Ref(), time.Hour)
			return err
		}},
		{"start: an idle instance", ClauseState, func(t *testing.T) error {
			p := pooled(t, s, "i-s5")
			_, err := s.Start(ctx, p.Key, claimReq("r5"), 10*time.Minute)
			return err
		}},
		{"start: past its keep time", ClauseLease, func(t *testing.T) error {
			p := pooled(t, s, "i-s6")
			st, err := s.Stop(ctx, p.Ref(), time.Hour)
			must(t, err)
			clk.Add(61 * time.Minute)
			defer clk.Add(-61 * time.Minute)
			_, err = s.Start(ctx, st.Key, claimReq("r6"), 10*time.Minute)
			return err
		}},
		{"start: another owner", ClauseOwner, func(t *testing.T) error {
			p := pooled(t, s, "i-s7")
			st, err := s.Stop(ctx, p.Ref(), time.Hour)
			must(t, err)
			req := claimReq("r7")
			req.Owner = "other"
			_, err = s.Start(ctx, st.Key, req, 10*time.Minute)
			return err
		}},
		{"start: too old for the pool", ClauseAge, func(t *testing.T) error {
			p := pooled(t, s, "i-s8")
			st, err := s.Stop(ctx, p.Ref(), 48*time.Hour)
			must(t, err)
			clk.Add(25 * time.Hour)
			defer clk.Add(-25 * time.Hour)
			_, err = s.Start(ctx, st.Key, claimReq("r8"), 10*time.Minute)
			return err
		}},
		{"start: started twice", ClauseState, func(t *testing.T) error {
			p := pooled(t, s, "i-s9")
			st, err := s.Stop(ctx, p.Ref(), time.Hour)
			must(t, err)
			_, err = s.Start(ctx, st.Key, claimReq("r9"), 10*time.Minute)
			must(t, err)
			_, err = s.Start(ctx, st.Key, claimReq("r9b"), 10*time.Minute)
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantClause(t, c.run(t), c.want)
		})
	}
}

func TestAStoppedTierIsRefusedForASpotPoolWithoutOnDemand(t *testing.T) {
	p := validPool()
	p.UsageClass, p.OnDemandFallback = UsageClassSpot, false
	p.Stopped = &StoppedTier{Max: 2, KeepSeconds: 3600}
	err := p.Validate()
	if err == nil || !strings.HasPrefix(err.Error(), "stopped: ") || !strings.Contains(err.Error(), "on-demand") {
		t.Fatalf("Validate = %v, want the stopped field refused for a spot pool", err)
	}
	p.OnDemandFallback = true
	if err := p.Validate(); err != nil {
		t.Fatalf("a spot pool with on-demand fallback: %v", err)
	}
	p.Stopped.Max = 0
	if err := p.Validate(); err == nil || !strings.HasPrefix(err.Error(), "stopped.max: ") {
		t.Fatalf("Validate = %v, want stopped.max refused", err)
	}
}
