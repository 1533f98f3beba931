package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state/statetest"
)

// BenchmarkAgentIdle runs the real agent with its default intervals on an
// idle pooled instance, then on an assigned one, for 20 s each, and reports
// its DynamoDB calls per minute, CPU time per minute and resident memory.
// The same agent then runs idle with the peer design's intervals (a record
// read every 0.25 s while waiting for a run, a heartbeat every 5 s): the
// "peer-idle" figures are what that polling costs, measured, not modelled.
// Run with: go test ./agent -run '^$' -bench AgentIdle -benchtime 1x
func BenchmarkAgentIdle(b *testing.B) {
	def := config.Defaults()
	variants := []struct {
		prefix          string
		idle, heartbeat time.Duration
		phases          []string
	}{
		{"", def.IdlePoll.Duration, def.HeartbeatInterval.Duration, []string{"idle", "assigned"}},
		{"peer-", 250 * time.Millisecond, 5 * time.Second, []string{"idle"}},
	}
	for i := 0; i < b.N; i++ {
		for _, v := range variants {
			w := newWorld(b, "")
			// The intervals of production, not the short ones of the tests.
			cfgPath := filepath.Join(w.dir, "agent.json")
			c, err := config.Load(cfgPath, true)
			must(b, err)
			c.HeartbeatInterval, c.IdlePoll, c.AssignedPoll = config.Duration{Duration: v.heartbeat}, config.Duration{Duration: v.idle}, def.AssignedPoll
			raw, _ := json.Marshal(c)
			must(b, os.WriteFile(cfgPath, raw, 0o600))
			statetest.Pooled(b, w.store, statetest.Spec{ID: w.id, RoleID: testRoleID, Pool: "linux", Owner: "acme", InstanceType: "c7i.large", UsageClass: "on-demand"})
			w.start()
			time.Sleep(3 * time.Second) // start-up: pre-runner, first signals
			for _, phase := range v.phases {
				if phase == "assigned" {
					inst, err := w.store.Claim(ctx, w.key, state.ClaimRequest{RunID: "bench", Pool: "linux", Owner: "acme", ClaimTTL: 5 * time.Minute, Registration: w.registration()})
					must(b, err)
					w.wait(inst, state.SignalRegOK, state.SignalRegFailed)
					time.Sleep(2 * time.Second)
				}
				reads0, writes0 := env.Calls("DynamoDB_20120810.GetItem"), env.Calls("DynamoDB_20120810.UpdateItem")
				cpu0 := cpuTime(w.agent.Process.Pid)
				const window = 20 * time.Second
				time.Sleep(window)
				perMin := func(n int64) float64 { return float64(n) * float64(time.Minute) / float64(window) }
				name := v.prefix + phase
				b.ReportMetric(perMin(env.Calls("DynamoDB_20120810.GetItem")-reads0), name+"-reads/min")
				b.ReportMetric(perMin(env.Calls("DynamoDB_20120810.UpdateItem")-writes0), name+"-writes/min")
				b.ReportMetric(perMin(int64((cpuTime(w.agent.Process.Pid)-cpu0)/time.Millisecond)), name+"-cpu-ms/min")
				b.ReportMetric(float64(rssKB(w.agent.Process.Pid)), name+"-rss-KB")
			}
			// The call counters are shared: the next variant measures alone.
			syscall.Kill(-w.agent.Process.Pid, syscall.SIGKILL)
		}
	}
}

// cpuTime reads utime+stime of a process from /proc (clock ticks of 10 ms).
func cpuTime(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.Atoi(fields[11])
	st, _ := strconv.Atoi(fields[12])
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func rssKB(pid int) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

// BenchmarkNextJITJobGap runs eight jobs of one just-in-time assignment as
// a runner user of their own, each touching its home, /tmp and the work
// folder, and reports the gap from a job's end to the next job's start
// (the next just-in-time runner's configuration asked, the last job's
// leftovers cleaned up and verified, the runner started, the job taken):
// p50 and max, in milliseconds.
// Run with: go test ./agent -run '^$' -bench NextJITJobGap -benchtime 1x
func BenchmarkNextJITJobGap(b *testing.B) {
	for i := 0; i < b.N; i++ {
		w, _, inst := jitWorld(b)
		w.jobUser()
		w.start()
		w.markRunning(inst)
		var gaps []time.Duration
		last := w.job("ghr-run-a-jit", "echo first")
		for n := 0; n < 8; n++ {
			job := w.job("ghr-run-a-jit", "echo x >~/.cache-$RANDOM; echo x >/tmp/ghr-gap-$RANDOM; mkdir -p _tool/go && echo x >_tool/go/bin")
			if job.ExitCode != 0 {
				b.Fatalf("job %d: %+v", n, job)
			}
			gaps = append(gaps, job.Started.Sub(last.Finished))
			last = job
		}
		slices.Sort(gaps)
		b.ReportMetric(float64(gaps[len(gaps)/2].Milliseconds()), "gap-p50-ms")
		b.ReportMetric(float64(gaps[len(gaps)-1].Milliseconds()), "gap-max-ms")
	}
}
