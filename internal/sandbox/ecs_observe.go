package sandbox

import (
	"sort"
	"syscall"
)

// What tests see of the ECS tasks the sandbox runs: the running tasks, their
// starts, events and violations, and killing one as a task that dies.

// tasks lists the running tasks, by service name then start.
func (t *ecsTasks) tasks() []ECSTask {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []ECSTask
	for _, sv := range t.services {
		if sv.task != nil {
			out = append(out, sv.task.ECSTask)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Service != out[j].Service {
			return out[i].Service < out[j].Service
		}
		return out[i].Started.Before(out[j].Started)
	})
	return out
}

// ECSTasks lists the tasks running now, one at most per service.
func (s *Sandbox) ECSTasks() []ECSTask { return s.ecsTasks.tasks() }

// KillECSTask kills the process of the service's running task (SIGKILL),
// as a task that dies; the service replaces it after a short backoff.
// False when the service runs no task.
func (s *Sandbox) KillECSTask(service string) bool {
	t := s.ecsTasks
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, sv := range t.services {
		if sv.name == service && sv.task != nil {
			return syscall.Kill(-sv.task.PID, syscall.SIGKILL) == nil
		}
	}
	return false
}

// ECSTaskStarts counts the task starts so far, by service name.
func (s *Sandbox) ECSTaskStarts() map[string]int {
	t := s.ecsTasks
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for k, v := range t.starts {
		out[k] = v
	}
	return out
}

// ECSTaskEvents lists every task's starts, stops, kills and exits so far,
// in order.
func (s *Sandbox) ECSTaskEvents() []ECSTaskEvent {
	t := s.ecsTasks
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]ECSTaskEvent(nil), t.events...)
}

// ECSViolations lists the times a service was to run two tasks at once
// (none was started); a correct runner has none.
func (s *Sandbox) ECSViolations() []string {
	t := s.ecsTasks
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.violations...)
}
