package listener

import (
	"slices"
	"testing"
	"time"
)

func TestToTrim(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	waited := now.Add(-trimAfter)
	fresh := now.Add(-trimAfter + time.Second)
	idle := func(at time.Time) standing { return standing{ready: true, readyAt: at, instanceID: "i-x"} }
	cases := []struct {
		name          string
		assigned, max int
		runs          map[string]standing
		want          []string
	}{
		{"as many runs as jobs: none given back", 2, 3,
			map[string]standing{"a": idle(waited), "b": idle(waited)}, nil},
		{"a cancelled job's idle runner is given back", 1, 3,
			map[string]standing{"a": idle(waited), "b": {ready: true, readyAt: waited, started: true}}, []string{"a"}},
		{"a runner that started a job is never given back", 0, 3,
			map[string]standing{"a": {ready: true, readyAt: waited, started: true}}, nil},
		{"a runner ready for less than trimAfter waits", 0, 3,
			map[string]standing{"a": idle(fresh)}, nil},
		{"a run still being provisioned is not a candidate", 0, 3,
			map[string]standing{"a": {}}, nil},
		{"an adopted claim is not a candidate", 0, 3,
			map[string]standing{"a": {ready: true, readyAt: waited, adopted: true}}, nil},
		{"runs being given back count against the surplus", 1, 3,
			map[string]standing{"a": idle(waited), "b": idle(waited), "c": {ready: true, readyAt: waited, trimming: true}}, []string{"a"}},
		{"the longest waiting first, as many as the surplus", 1, 3,
			map[string]standing{"a": idle(waited), "b": idle(waited.Add(-time.Minute)), "c": idle(waited.Add(-2 * time.Minute))}, []string{"c", "b"}},
		{"more jobs than the maximum: the maximum is what is wanted", 10, 2,
			map[string]standing{"a": idle(waited), "b": idle(waited), "c": idle(waited)}, []string{"a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := toTrim(c.assigned, c.max, c.runs, now)
			if !slices.Equal(got, c.want) {
				t.Errorf("toTrim(%d assigned, max %d) = %v, want %v", c.assigned, c.max, got, c.want)
			}
		})
	}
}
