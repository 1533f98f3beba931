package controlplane

import (
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

func TestMintWhy(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	asking := func(change func(*state.Instance)) *state.Instance {
		rec := &state.Instance{Key: state.InstanceKey("AROAPOOL", "i-1"), ID: "i-1", Pool: "linux", State: state.Running, RunID: "run-1", Assignment: "a1", JITSeq: 1, Threshold: now.Unix() + 60,
			Signals: map[string]state.Signal{state.SignalJITNext: {Assignment: "a1", Detail: "2"}}}
		if change != nil {
			change(rec)
		}
		return rec
	}
	ready := &state.Run{ID: "run-1", Pool: "linux", Status: state.RunReady, InstanceIDs: []string{"i-1", "i-2"}}
	pool := &state.PoolConfig{Name: "linux", InstanceRoleID: "AROAPOOL"}
	// A record rewritten by its instance (issue 29): another run's id, or
	// another pool's, or another instance's id in the record.
	cases := []struct {
		name string
		rec  *state.Instance
		run  *state.Run
		want string
	}{
		{"an instance that wrote itself into another run", asking(func(i *state.Instance) { i.Key = state.InstanceKey("AROAPOOL", "i-9") }), ready,
			"instance i-9 is not one of run run-1's (never was, or given up)"},
		{"an instance that wrote another member's id into its record", asking(func(i *state.Instance) { i.Key = state.InstanceKey("AROAPOOL", "i-9"); i.ID = "i-2" }), ready,
			"instance i-9 is not one of run run-1's (never was, or given up)"},
		{"an instance of another pool's role that wrote the run's pool", asking(func(i *state.Instance) { i.Key = state.InstanceKey("AROAGPU", "i-1") }), ready,
			"record AROAGPU:i-1 is not of pool linux's instance role"},
		{"an instance its provision gave up", asking(nil), &state.Run{ID: "run-1", Pool: "linux", Status: state.RunReady, InstanceIDs: []string{"i-1"}, GivenUp: []string{"i-1"}},
			"instance i-1 is not one of run run-1's (never was, or given up)"},
		{"a running instance asking for the next", asking(nil), ready, ""},
		{"asking for one already written", asking(func(i *state.Instance) { i.JITSeq = 2 }), ready, "no configuration asked for"},
		{"a request of an earlier assignment", asking(func(i *state.Instance) { i.Assignment = "a2" }), ready, "no configuration asked for"},
		{"an idle instance", asking(func(i *state.Instance) { i.State = state.Idle }), ready, "instance is idle"},
		{"the lease passed", asking(func(i *state.Instance) { i.Threshold = now.Unix() }), ready, "lease has passed"},
		{"a released run", asking(nil), &state.Run{ID: "run-1", Pool: "linux", Status: state.RunReleased, InstanceIDs: []string{"i-1"}}, "run is released"},
		{"a failed run", asking(nil), &state.Run{ID: "run-1", Pool: "linux", Status: state.RunFailed, InstanceIDs: []string{"i-1"}}, "run is failed"},
		{"no run item", asking(nil), nil, "run run-1 not found"},
		// A scale set's runners come from its listener only: a REST runner
		// under the run's label would wait for a job GitHub never sends it.
		{"a scale set's standing run", asking(nil), &state.Run{ID: "run-1", Pool: "linux", Status: state.RunReady, InstanceIDs: []string{"i-1"}, ScaleSet: "7"},
			"run run-1 serves scale set 7: its runner comes from the listener, one per job"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := MintWhy(c.rec, c.run, pool, now); got != c.want {
				t.Errorf("MintWhy = %q, want %q", got, c.want)
			}
		})
	}
}
