package sandbox

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
)

// The CloudWatch Logs faults of a chaos run (logsfaults.go answers them)
// and invariant 9: log shipping in trouble never holds an agent up, and
// what an agent logs reaches its stream once CloudWatch Logs recovers.
const (
	faultLogsThrottleAll = "CloudWatch Logs throttled: every write for 10-25 s (background)"
	faultLogs500Share    = "CloudWatch Logs 500: half the writes for 5-10 s (background)"
	faultLogsHangAll     = "CloudWatch Logs unreachable: writes hang 8-15 s (background)"
	faultLogsThrottled   = "CloudWatch Logs writes: throttled (400)"
	faultLogs500         = "CloudWatch Logs writes: 500, nothing stored"
	faultLogs500After    = "CloudWatch Logs writes: stored, then answered 500"
	faultLogsHung        = "CloudWatch Logs writes: held until the burst ended or the caller gave up"
)

// cwLogs is the CloudWatch Logs trouble under way, guarded by chaos.mu.
type cwLogs struct {
	logsMode  string    // one of the burst faults above, "" for none
	logsUntil time.Time // when the burst ends
}

// logsAnswer decides one CloudWatch Logs write from the burst under way.
func (c *chaos) logsAnswer(op string) LogsAnswer {
	c.mu.Lock()
	defer c.mu.Unlock()
	left := time.Until(c.logsUntil)
	if c.logsMode == "" || left <= 0 {
		return LogsAnswer{}
	}
	switch c.logsMode {
	case faultLogsThrottleAll:
		c.faults[faultLogsThrottled]++
		return LogsAnswer{Throttle: true}
	case faultLogsHangAll:
		c.faults[faultLogsHung]++
		return LogsAnswer{Hang: left}
	}
	switch c.rng.Intn(4) {
	case 0:
		c.faults[faultLogs500]++
		return LogsAnswer{Fail: true}
	case 1:
		if op == "PutLogEvents" {
			c.faults[faultLogs500After]++
			return LogsAnswer{FailAfter: true}
		}
	}
	return LogsAnswer{}
}

// logsFaults starts a CloudWatch Logs burst every 5-10 s, most of them
// longer than the shipper's limit per request (10 s), so that its flushes
// fail rather than the SDK's retries absorbing them: every write throttled
// (an account over its quota), half of them answered 500, or every write
// held.
func (c *chaos) logsFaults(ctx context.Context) {
	c.bursts(ctx, 5000, 5000, func() (last time.Duration) {
		c.mu.Lock()
		defer c.mu.Unlock()
		switch c.rng.Intn(3) {
		case 0:
			c.logsMode, last = faultLogsThrottleAll, time.Duration(10000+c.rng.Intn(15000))*time.Millisecond
		case 1:
			c.logsMode, last = faultLogs500Share, time.Duration(5000+c.rng.Intn(5000))*time.Millisecond
		default:
			c.logsMode, last = faultLogsHangAll, time.Duration(8000+c.rng.Intn(7000))*time.Millisecond
		}
		c.faults[c.logsMode]++
		c.logsUntil = time.Now().Add(last)
		return last
	}, func() {
		c.mu.Lock()
		c.logsMode = ""
		c.mu.Unlock()
	})
}

// checkLogs returns the violations of invariant 9, once the faults are off
// and refresh has settled: every line the current agent process of each
// live instance has written since it started (its own log, which it also
// ships, and whose batches met the bursts) is in its pool's group within
// twelve flushes; and bursts that no write met are a fault that missed its aim.
func (c *chaos) checkLogs(ctx context.Context) []string {
	var v []string
	c.mu.Lock()
	bursts := c.faults[faultLogsThrottleAll] + c.faults[faultLogs500Share] + c.faults[faultLogsHangAll]
	met := c.faults[faultLogsThrottled] + c.faults[faultLogs500] + c.faults[faultLogs500After] + c.faults[faultLogsHung]
	c.mu.Unlock()
	if bursts > 0 && met == 0 {
		v = append(v, fmt.Sprintf("fault injection: %d CloudWatch Logs bursts, no write met one: the agents' log shipping went around the endpoint", bursts))
	}
	live, err := c.fleet.List(ctx, fleet.Filter{})
	if err != nil {
		return append(v, "list instances: "+err.Error())
	}
	logs := admin.Logs(c.sb.AWS)
	type agentLog struct {
		pid     int
		group   string
		missing map[string]bool // lines not (yet) in the stream
	}
	wanted := map[string]*agentLog{} // by instance id
	for _, in := range live {
		if pid, lines := c.agentLines(in.ID); pid > 0 {
			l := &agentLog{pid: pid, group: "/ghrunner/" + Environment + "/" + in.Tags[fleet.TagPool], missing: map[string]bool{}}
			for _, line := range lines {
				l.missing[line] = true
			}
			wanted[in.ID] = l
		}
	}
	lines := 0
	for _, l := range wanted {
		lines += len(l.missing)
	}
	fmt.Fprintf(c.out, "  comparing %d lines that %d agents logged with their log streams ...\n", lines, len(wanted))
	deadline := time.Now().Add(60 * time.Second) // twelve flushes of the agent's default 5 s
	for ctx.Err() == nil {
		left := 0
		for id, l := range wanted {
			if len(l.missing) > 0 {
				streamLines(ctx, logs, l.group, id+"/agent", func(line string) { delete(l.missing, line) })
			}
			left += len(l.missing)
		}
		if left == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	var lost []string
	for id, l := range wanted {
		// An instance terminated meanwhile, or an agent restarted, is not
		// a lost line.
		if len(l.missing) == 0 || c.agentPID(id) != l.pid {
			continue
		}
		first := slices.Sorted(maps.Keys(l.missing))[0]
		if len(first) > 160 {
			first = first[:160] + "..."
		}
		lost = append(lost, fmt.Sprintf("invariant 9: %d lines the agent of %s (pid %d) logged are not in %s %s/agent 60 s after CloudWatch Logs recovered, e.g. %s", len(l.missing), id, l.pid, l.group, id, first))
	}
	sort.Strings(lost)
	return append(v, lost...)
}

func (c *chaos) agentPID(id string) int {
	if a := c.sb.instances.Agent(id); a != nil {
		return a.PID()
	}
	return 0
}

// agentLines returns the pid of an instance's agent and the lines of its
// own log that process wrote, from its start line on (the host keeps the
// output of every process, and the runner's, in one file).
func (c *chaos) agentLines(id string) (int, []string) {
	pid := c.agentPID(id)
	if pid == 0 {
		return 0, nil
	}
	raw, err := os.ReadFile(c.sb.instances.Agent(id).StdoutFile())
	if err != nil {
		return 0, nil
	}
	var lines []string
	current := false
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.Contains(line, `"component":"agent"`) {
			continue
		}
		if strings.Contains(line, `"msg":"agent starting"`) {
			current = strings.Contains(line, fmt.Sprintf(`"pid":%d,`, pid))
		}
		if current {
			lines = append(lines, line)
		}
	}
	return pid, lines
}

// streamLines reads a log stream from its start and gives each line to see.
func streamLines(ctx context.Context, logs *cloudwatchlogs.Client, group, stream string, see func(string)) {
	var token *string
	for page := 0; page < 100; page++ {
		res, err := logs.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: aws.String(group), LogStreamName: aws.String(stream), StartFromHead: aws.Bool(true), NextToken: token})
		if err != nil {
			return
		}
		for _, e := range res.Events {
			see(aws.ToString(e.Message))
		}
		if len(res.Events) == 0 || aws.ToString(res.NextForwardToken) == aws.ToString(token) {
			return
		}
		token = res.NextForwardToken
	}
}
