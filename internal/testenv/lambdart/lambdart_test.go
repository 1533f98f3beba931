package lambdart

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/testbin"
)

// build compiles the echo function once for the package.
func build(t *testing.T) string {
	t.Helper()
	bin, err := testbin.Build(testbin.Module + "/internal/testenv/lambdart/echofn")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

type echo struct {
	Said      string `json:"said"`
	RequestID string `json:"requestId"`
	PID       int    `json:"pid"`
	Env       string `json:"env"`
	Deadline  bool   `json:"deadline"`
}

func TestInvokeThroughTheRuntimeAPI(t *testing.T) {
	h, err := New(Function{Name: "echo", Bootstrap: build(t), Env: map[string]string{"GREETING": "hi"}, Timeout: 2 * time.Second, Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()

	res, err := h.Invoke(ctx, []byte(`{"say":"one"}`))
	if err != nil || res.FunctionError != "" {
		t.Fatalf("invoke: %v %+v", err, res)
	}
	var first echo
	json.Unmarshal(res.Payload, &first)
	if first.Said != "one" || first.Env != "hi" || !first.Deadline || first.RequestID != res.RequestID {
		t.Fatalf("payload = %s", res.Payload)
	}
	// A second invocation reuses the warm environment.
	res, _ = h.Invoke(ctx, []byte(`{"say":"two"}`))
	var second echo
	json.Unmarshal(res.Payload, &second)
	if second.PID != first.PID || h.Inits.Load() != 1 {
		t.Fatalf("warm environment not reused: pids %d %d, inits %d", first.PID, second.PID, h.Inits.Load())
	}

	// A returned error is a function error with the message, like Lambda.
	res, _ = h.Invoke(ctx, []byte(`{"fail":"pool: unknown pool \"gpu\""}`))
	if res.FunctionError != "Unhandled" || !strings.Contains(string(res.Payload), `unknown pool`) {
		t.Fatalf("error result = %+v %s", res, res.Payload)
	}
}

func TestTimeoutAndCrashKillTheEnvironment(t *testing.T) {
	h, err := New(Function{Name: "echo", Bootstrap: build(t), Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	res, _ := h.Invoke(ctx, []byte(`{"sleepMs":2000}`))
	if res.FunctionError != "Unhandled" || !strings.Contains(string(res.Payload), "Task timed out after 0.30 seconds") {
		t.Fatalf("timeout result = %+v %s", res, res.Payload)
	}
	res, _ = h.Invoke(ctx, []byte(`{"crash":true}`))
	if res.FunctionError != "Unhandled" || !strings.Contains(string(res.Payload), "Runtime exited") {
		t.Fatalf("crash result = %+v %s", res, res.Payload)
	}
	res, _ = h.Invoke(ctx, []byte(`{"say":"after"}`))
	if res.FunctionError != "" || h.Inits.Load() != 3 {
		t.Fatalf("after crash: %+v, inits %d (want a fresh environment each time)", res, h.Inits.Load())
	}
	// A caller that gives up kills the invocation midway.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := h.Invoke(short, []byte(`{"sleepMs":250}`)); err == nil {
		t.Fatal("cancelled invocation returned no error")
	}
}

// A bootstrap that ends before it asks for an invocation failed its init:
// Lambda answers that invocation with Runtime.ExitError and tries init
// again on the next one. Starting environment after environment instead
// spun: about 2,000 processes a second for a function whose settings were
// wrong, and an invocation that never returned.
func TestAFunctionWhoseInitFailsAnswersEachInvocationWithAnExitError(t *testing.T) {
	h, err := New(Function{Name: "echo", Bootstrap: build(t), Env: map[string]string{"FAIL_INIT": "1"}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for i := 1; i <= 2; i++ {
		res, err := h.Invoke(context.Background(), []byte(`{"say":"one"}`))
		if err != nil || res.FunctionError != "Unhandled" || !strings.Contains(string(res.Payload), "Runtime.ExitError") {
			t.Fatalf("invocation %d: %+v %s, %v: want Runtime.ExitError", i, res, res.Payload, err)
		}
		if n := h.Inits.Load(); n != int64(i) {
			t.Fatalf("after invocation %d: %d environments started, want one per invocation", i, n)
		}
	}
}

func TestConcurrentInvocationsGetTheirOwnEnvironments(t *testing.T) {
	h, err := New(Function{Name: "echo", Bootstrap: build(t), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var wg sync.WaitGroup
	pids := make([]int, 4)
	for i := range pids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := h.Invoke(context.Background(), []byte(`{"sleepMs":300}`))
			if err != nil || res.FunctionError != "" {
				t.Error(err, res)
				return
			}
			var e echo
			json.Unmarshal(res.Payload, &e)
			pids[i] = e.PID
		}()
	}
	wg.Wait()
	seen := map[int]bool{}
	for _, p := range pids {
		seen[p] = true
	}
	if len(seen) != 4 {
		t.Fatalf("4 concurrent invocations ran in %d environments, want 4", len(seen))
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}
