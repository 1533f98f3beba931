package listener

import "testing"

func TestToStart(t *testing.T) {
	cases := []struct {
		name                              string
		assigned, max, live, releasing, n int
		paused                            bool
	}{
		{"a job and no runner: one", 1, 3, 0, 0, 1, false},
		{"as many jobs as runners: none", 2, 3, 2, 0, 0, false},
		{"more jobs than the maximum: up to it", 10, 3, 1, 0, 2, false},
		{"an instance being released is waited for, not launched beside", 3, 3, 2, 1, 0, false},
		{"fewer jobs than runners: none stopped here, none started", 1, 3, 2, 0, 0, false},
		{"paused after a failed provision: none", 2, 3, 0, 0, 0, true},
		{"no job: none", 0, 3, 0, 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := toStart(c.assigned, c.max, c.live, c.releasing, c.paused); got != c.n {
				t.Errorf("toStart(%d assigned, max %d, %d live, %d releasing, paused %v) = %d, want %d", c.assigned, c.max, c.live, c.releasing, c.paused, got, c.n)
			}
		})
	}
}
