package sandbox

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
)

// The sandbox's front for ECS's API: moto answers, with the task counts
// of the tasks the sandbox really runs.

const ecsDescribeServices = "AmazonEC2ContainerServiceV20141113.DescribeServices"

// withECS passes ECS's API calls to moto, whose DescribeServices counts
// tasks it never runs (runningCount 0 after CreateService, desiredCount
// after UpdateService): the front puts the sandbox's own count in its
// answers, the service's runningCount and pendingCount and those of its
// PRIMARY deployment, whose rolloutState is COMPLETED once its task runs.
// A waiter for a stable service (runningCount = desiredCount, one
// deployment) waits for the real task.
func (t *ecsTasks) withECS(moto http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != ecsDescribeServices {
			moto.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		moto.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if rec.Code == http.StatusOK {
			body = t.countTasks(body)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(rec.Code)
		w.Write(body)
	})
}

// countTasks rewrites a DescribeServices answer's counts to the tasks the
// sandbox runs.
func (t *ecsTasks) countTasks(body []byte) []byte {
	var out map[string]json.RawMessage
	if json.Unmarshal(body, &out) != nil {
		return body
	}
	var services []map[string]any
	if json.Unmarshal(out["services"], &services) != nil {
		return body
	}
	t.mu.Lock()
	for _, sv := range services {
		arn, _ := sv["serviceArn"].(string)
		def, _ := sv["taskDefinition"].(string)
		desired, _ := sv["desiredCount"].(float64)
		running := 0.0
		if s := t.services[arn]; s != nil && s.task != nil && s.task.TaskDefinition == def {
			running = 1
		}
		pending := max(desired-running, 0)
		sv["runningCount"], sv["pendingCount"] = running, pending
		deps, _ := sv["deployments"].([]any)
		for _, d := range deps {
			if dep, ok := d.(map[string]any); ok && dep["status"] == "PRIMARY" {
				dep["runningCount"], dep["pendingCount"], dep["desiredCount"], dep["taskDefinition"] = running, pending, desired, def
				dep["rolloutState"] = "IN_PROGRESS"
				if running >= desired {
					dep["rolloutState"] = "COMPLETED"
				}
			}
		}
	}
	t.mu.Unlock()
	raw, err := json.Marshal(services)
	if err != nil {
		return body
	}
	out["services"] = raw
	b, err := json.Marshal(out)
	if err != nil {
		return body
	}
	return b
}
