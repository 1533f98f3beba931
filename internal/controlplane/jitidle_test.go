package controlplane

import (
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// TestAGoneRunnerStartsTheCountAgainOnlyIfItWentTooSoonToHaveBeenIdle
// (issue 37 item 7): GitHub's API shows a just-in-time runner removed
// after its job and one removed because its listener took no job alike:
// gone. The last runner written, gone within IdleMin of its writing, took
// a job; any other lets through only the runner after the last written.
func TestAGoneRunnerStartsTheCountAgainOnlyIfItWentTooSoonToHaveBeenIdle(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := DefaultJITLimits
	rec := func(seq, served int, mintedAgo time.Duration) *state.Instance {
		r := &state.Instance{JITSeq: seq, JITServed: served}
		if mintedAgo >= 0 {
			r.JITMintedAt = now.Add(-mintedAgo).Unix()
		}
		return r
	}
	cases := []struct {
		name string
		rec  *state.Instance
		n    int
		want int
		next bool // DecideJIT then allows the runner after the last written
	}{
		{"the last, gone 20 s after it was written: a job", rec(5, 2, 20*time.Second), 5, 5, true},
		{"the last, gone just under IdleMin after: a job", rec(5, 2, l.IdleMin-time.Second), 5, 5, true},
		{"the last, gone IdleMin after: perhaps removed idle, one more", rec(5, 2, l.IdleMin), 5, 3, true},
		{"the last, gone 4 min after: perhaps removed idle, one more", rec(5, 0, 4*time.Minute), 5, 3, true},
		{"an earlier one (its writing not known), the last still listed: none more", rec(5, 0, 20*time.Second), 4, 2, false},
		{"never less than already seen", rec(7, 5, 4*time.Minute), 6, 5, true},
		{"a record from before jitMintedAt: perhaps removed idle", rec(5, 0, -1), 5, 3, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := creditGone(c.rec, c.n, now, l)
			if got != c.want {
				t.Fatalf("creditGone(seq %d, served %d, runner %d) = %d, want %d", c.rec.JITSeq, c.rec.JITServed, c.n, got, c.want)
			}
			// What DecideJIT then allows for the next number.
			c.rec.JITServed = got
			allowed := !DecideJIT(c.rec, true, now, l).Refused()
			if allowed != c.next {
				t.Fatalf("after the look the next runner is allowed: %v, want %v", allowed, c.next)
			}
		})
	}
}
