package sandbox

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// One ECS service's worker: it alone starts, replaces and stops the
// service's task, one at a time, and records each step as an ECSTaskEvent.
// The model it follows is described at the top of ecs.go.

// serve is one service's worker: it alone starts and stops the service's
// tasks, one at a time.
func (t *ecsTasks) serve(ctx context.Context, sv *ecsService) {
	defer t.wg.Done()
	var (
		cur      *ecsTask
		next     time.Time // no start before
		failures int
	)
	for {
		t.mu.Lock()
		count, def := sv.count, sv.def
		t.mu.Unlock()
		if cur != nil {
			select {
			case <-cur.done: // it ended on its own (or was killed): replace it
				lived := time.Since(cur.Started)
				if lived < 10*time.Second {
					failures++
				} else {
					failures = 0
				}
				delay := time.Second
				if failures > 0 {
					delay <<= min(failures-1, 5)
				}
				next = time.Now().Add(delay)
				fmt.Fprintf(t.logs, "sandbox: ecs: %s/%s: task %s exited after %s; replacing it in %s\n", sv.cluster, sv.name, cur.ID, lived.Round(time.Millisecond), delay)
				cur = nil
			default:
			}
		}
		if cur != nil && (ctx.Err() != nil || count == 0 || cur.TaskDefinition != def) {
			t.stopTask(ctx, sv, cur)
			cur, next = nil, time.Time{}
		}
		if ctx.Err() != nil {
			return
		}
		if cur == nil && count == 1 && !time.Now().Before(next) {
			task, err := t.startTask(ctx, sv, def)
			if err != nil {
				failures++
				delay := time.Second << min(failures-1, 5)
				next = time.Now().Add(delay)
				if ctx.Err() == nil {
					fmt.Fprintf(t.logs, "sandbox: ecs: %s/%s: starting a task of %s: %v (again in %s)\n", sv.cluster, sv.name, def, err, delay)
				}
			}
			cur = task
		}
		var exited <-chan struct{}
		if cur != nil {
			exited = cur.done
		}
		var timer <-chan time.Time
		var tm *time.Timer
		if cur == nil && count == 1 {
			tm = time.NewTimer(max(time.Until(next), 0))
			timer = tm.C
		}
		select {
		case <-ctx.Done():
		case <-sv.wake:
		case <-exited:
		case <-timer:
		}
		if tm != nil {
			tm.Stop()
		}
	}
}

// stopTask stops a task as ECS does: SIGTERM, SIGKILL after its stop
// timeout, or after at most 5 s once the sandbox stops.
func (t *ecsTasks) stopTask(ctx context.Context, sv *ecsService, task *ecsTask) {
	t.event("stop", sv, task)
	_ = syscall.Kill(-task.cmd.Process.Pid, syscall.SIGTERM)
	timeout := time.NewTimer(task.stopTimeout)
	defer timeout.Stop()
	select {
	case <-task.done:
	case <-timeout.C:
	case <-ctx.Done():
		select {
		case <-task.done:
		case <-time.After(min(task.stopTimeout, 5*time.Second)):
		}
	}
	select {
	case <-task.done:
	default:
		t.event("kill", sv, task)
		_ = syscall.Kill(-task.cmd.Process.Pid, syscall.SIGKILL)
		<-task.done
	}
}

func (t *ecsTasks) event(kind string, sv *ecsService, task *ecsTask) {
	t.mu.Lock()
	t.events = append(t.events, ECSTaskEvent{Kind: kind, Service: sv.name, TaskID: task.ID, TaskDefinition: task.TaskDefinition, PID: task.PID, At: time.Now()})
	t.mu.Unlock()
}
