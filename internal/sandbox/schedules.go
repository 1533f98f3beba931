package sandbox

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/robfig/cron/v3"
)

// schedules fires the EventBridge Scheduler schedules deployed in moto
// (which stores them but never fires them) at their rate or cron, as
// asynchronous invocations. As on AWS, a firing does not wait for the
// previous run: the function's single-flight lease makes the later
// invocation return at once.
type schedules struct {
	client *scheduler.Client
	fns    *functions
	logs   io.Writer
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	next    map[string]time.Time
	fires   map[string]int
	results map[string][]error // per schedule, one per finished run (nil: it succeeded)
}

func startSchedules(client *scheduler.Client, fns *functions, logs io.Writer) *schedules {
	ctx, cancel := context.WithCancel(context.Background())
	s := &schedules{client: client, fns: fns, logs: logs, cancel: cancel, done: make(chan struct{}),
		next: map[string]time.Time{}, fires: map[string]int{}, results: map[string][]error{}}
	go s.loop(ctx)
	return s
}

func (s *schedules) stop() {
	s.cancel()
	<-s.done
}

func (s *schedules) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.fires {
		out[k] = v
	}
	return out
}

// finished returns the outcome of every finished run of a schedule.
func (s *schedules) finished(name string) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.results[name]...)
}

func (s *schedules) loop(ctx context.Context) {
	defer close(s.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if err := s.tick(ctx, now); err != nil && ctx.Err() == nil {
				fmt.Fprintf(s.logs, "sandbox: schedules: %v\n", err)
			}
		}
	}
}

func (s *schedules) tick(ctx context.Context, now time.Time) error {
	pages := scheduler.NewListSchedulesPaginator(s.client, &scheduler.ListSchedulesInput{})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, sum := range page.Schedules {
			if sum.State != schedtypes.ScheduleStateEnabled {
				continue
			}
			out, err := s.client.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: sum.Name})
			if err != nil {
				return err
			}
			s.consider(ctx, now, out)
		}
	}
	return nil
}

func (s *schedules) consider(ctx context.Context, now time.Time, sch *scheduler.GetScheduleOutput) {
	name, expr := aws.ToString(sch.Name), aws.ToString(sch.ScheduleExpression)
	loc, err := time.LoadLocation(aws.ToString(sch.ScheduleExpressionTimezone))
	if err != nil || aws.ToString(sch.ScheduleExpressionTimezone) == "" {
		loc = time.UTC
	}
	s.mu.Lock()
	next, known := s.next[name]
	if !known {
		// First sight: the first run is one period from now, as on AWS.
		n, err := nextRun(expr, now.In(loc))
		if err != nil {
			s.mu.Unlock()
			fmt.Fprintf(s.logs, "sandbox: schedule %s: %v\n", name, err)
			return
		}
		s.next[name] = n
		s.mu.Unlock()
		return
	}
	if now.Before(next) {
		s.mu.Unlock()
		return
	}
	n, _ := nextRun(expr, now.In(loc))
	s.next[name] = n
	s.fires[name]++
	s.mu.Unlock()
	fn, input := functionName(aws.ToString(sch.Target.Arn)), []byte(aws.ToString(sch.Target.Input))
	go func() {
		res, err := s.fns.invoke(context.Background(), fn, input, true) // Scheduler invokes Lambda asynchronously
		if err == nil && res.FunctionError != "" {
			err = fmt.Errorf("%s: %s", res.FunctionError, res.Payload)
		}
		if err != nil {
			fmt.Fprintf(s.logs, "sandbox: schedule %s → %s failed: %v\n", name, fn, err)
		}
		s.mu.Lock()
		s.results[name] = append(s.results[name], err)
		s.mu.Unlock()
	}()
}

var rateRE = regexp.MustCompile(`^rate\((\d+) (minutes?|hours?|days?)\)$`)

// nextRun is when a rate() or cron() expression fires next after now.
func nextRun(expr string, now time.Time) (time.Time, error) {
	if m := rateRE.FindStringSubmatch(expr); m != nil {
		n, _ := strconv.Atoi(m[1])
		unit := map[byte]time.Duration{'m': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[m[2][0]]
		return now.Add(time.Duration(n) * unit), nil
	}
	if strings.HasPrefix(expr, "cron(") && strings.HasSuffix(expr, ")") {
		f := strings.Fields(strings.TrimSuffix(strings.TrimPrefix(expr, "cron("), ")"))
		if len(f) != 6 {
			return time.Time{}, fmt.Errorf("%s: want 6 cron fields", expr)
		}
		// AWS's year field has no equivalent here; every year matches.
		sched, err := cron.ParseStandard(strings.Join(f[:5], " "))
		if err != nil {
			return time.Time{}, fmt.Errorf("%s: the sandbox cannot fire it: %v", expr, err)
		}
		return sched.Next(now), nil
	}
	return time.Time{}, fmt.Errorf("%s: the sandbox fires rate() and cron() schedules only", expr)
}
