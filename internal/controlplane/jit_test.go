package controlplane

import (
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

func TestMintWhy(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	asking := func(change func(*state.Instance)) *state.Instance {
		rec := &state.Instance{ID: "i-1", State: state.Running, RunID: "run-1", Assignment: "a1", JITSeq: 1, Threshold: now.Unix() + 60,
			Signals: map[string]state.Signal{state.SignalJITNext: {Assignment: "a1", Detail: "2"}}}
		if change != nil {
			change(rec)
		}
		return rec
	}
	ready := &state.Run{ID: "run-1", Status: state.RunReady}
	cases := []struct {
		name string
		rec  *state.Instance
		run  *state.Run
		want string
	}{
		{"a running instance asking for the next", asking(nil), ready, ""},
		{"asking for one already written", asking(func(i *state.Instance) { i.JITSeq = 2 }), ready, "no configuration asked for"},
		{"a request of an earlier assignment", asking(func(i *state.Instance) { i.Assignment = "a2" }), ready, "no configuration asked for"},
		{"an idle instance", asking(func(i *state.Instance) { i.State = state.Idle }), ready, "instance is idle"},
		{"the lease passed", asking(func(i *state.Instance) { i.Threshold = now.Unix() }), ready, "lease has passed"},
		{"a released run", asking(nil), &state.Run{ID: "run-1", Status: state.RunReleased}, "run is released"},
		{"a failed run", asking(nil), &state.Run{ID: "run-1", Status: state.RunFailed}, "run is failed"},
		{"no run item", asking(nil), nil, "run run-1 not found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := MintWhy(c.rec, c.run, now); got != c.want {
				t.Errorf("MintWhy = %q, want %q", got, c.want)
			}
		})
	}
}
