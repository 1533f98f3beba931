package sandbox

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// viewStates are the record states the live view counts.
var viewStates = state.LiveStates

// liveView prints the instances per state whenever the mix changes.
func (st *Story) liveView(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		last := ""
		for {
			counts := []string{}
			for _, s := range viewStates {
				n := 0
				for _, p := range append(slices.Clone(Pools), PoolStopped) {
					in, err := st.store.ByPoolState(ctx, p, s, time.Time{})
					if err != nil {
						n = -1
						break
					}
					n += len(in)
				}
				if n < 0 {
					break // shown at the next change
				}
				counts = append(counts, fmt.Sprintf("%s %d", s, n))
			}
			if line := strings.Join(counts, " · "); len(counts) == len(viewStates) && line != last {
				fmt.Fprintf(st.out, "[%5.1fs]      instances: %s\n", time.Since(st.start).Seconds(), line)
				last = line
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// Summary prints the final table.
func (st *Story) Summary(w io.Writer) {
	fmt.Fprintf(w, "\n%-4s  %-68s  %7s  %s\n", "", "step", "time", "result")
	for _, s := range st.Steps {
		mark := "ok"
		if !s.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%-4s  %-68s  %6.1fs  %s\n", mark, s.Name, s.Took.Seconds(), s.Got)
	}
	calls := st.sb.Invocations()
	names := make([]string, 0, len(calls))
	for n := range calls {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %d", n, calls[n]))
	}
	var fires []string
	for name, n := range st.sb.ScheduleFires() {
		fires = append(fires, fmt.Sprintf("%s %d", name, n))
	}
	sort.Strings(fires)
	if len(fires) == 0 {
		fires = []string{"none"}
	}
	fmt.Fprintf(w, "\ninstances launched: %d (and %d on %s) · invocations: %s · schedule firings: %s · total %.1fs\n",
		len(st.Launched), len(st.tier.launched), PoolStopped, strings.Join(parts, ", "), strings.Join(fires, ", "), time.Since(st.start).Seconds())
}
