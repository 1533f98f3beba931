// Package lambdart runs a Lambda function's `bootstrap` executable locally
// behind the Lambda runtime API (the HTTP contract of the provided.al2023
// runtime: /2018-06-01/runtime/invocation/next, …/response, …/error), the
// way the Lambda service does: one invocation at a time per execution
// environment, more environments for concurrent invocations, idle ones
// reused, an environment killed when an invocation outlives the timeout.
package lambdart

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/pinned"
)

// Function describes what to run.
type Function struct {
	Name      string
	Bootstrap string // path of the executable
	Env       map[string]string
	Timeout   time.Duration // default 3 s, as Lambda's
	MemoryMB  int           // default 128
	Region    string
	// Output receives the function's stdout and stderr (its logs).
	Output io.Writer
}

// Result is the outcome of one invocation, in the shape of the Invoke API.
type Result struct {
	Payload []byte
	// FunctionError is "" on success, "Unhandled" when the function returned
	// an error, crashed or timed out (the Invoke API's X-Amz-Function-Error).
	FunctionError string
	RequestID     string
	Duration      time.Duration
}

// Host runs the execution environments of one function.
type Host struct {
	fn     Function
	mu     sync.Mutex
	idle   []*env
	all    map[*env]bool
	closed bool
	seq    atomic.Int64
	// Inits counts environments started (cold starts).
	Inits atomic.Int64
}

// New returns a host for fn; environments start on demand.
func New(fn Function) (*Host, error) {
	if _, err := os.Stat(fn.Bootstrap); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	if fn.Timeout <= 0 {
		fn.Timeout = 3 * time.Second
	}
	if fn.MemoryMB <= 0 {
		fn.MemoryMB = 128
	}
	if fn.Output == nil {
		fn.Output = io.Discard
	}
	return &Host{fn: fn, all: map[*env]bool{}}, nil
}

// Invoke runs one invocation and waits for its result. Errors are reserved
// for the host itself (cannot start the runtime); function failures are
// reported in Result.FunctionError, as Lambda does.
func (h *Host) Invoke(ctx context.Context, payload []byte) (Result, error) {
	e, err := h.acquire()
	if err != nil {
		return Result{}, err
	}
	id := fmt.Sprintf("%s-%06d", strings.ReplaceAll(h.fn.Name, "/", "-"), h.seq.Add(1))
	inv := &invocation{id: id, payload: payload, deadline: time.Now().Add(h.fn.Timeout), done: make(chan Result, 1)}
	start := time.Now()
	select {
	case e.next <- inv:
	case <-e.exited:
		h.drop(e)
		if !e.served.Load() {
			// It never asked for an invocation: its init failed, which
			// Lambda reports to the invocation that started it.
			return unhandled(id, "Runtime.ExitError", fmt.Sprintf("RequestId: %s Error: Runtime exited during init: %s", id, e.exitErr())), nil
		}
		return h.Invoke(ctx, payload) // died while idle: start another
	}
	timer := time.NewTimer(h.fn.Timeout)
	defer timer.Stop()
	select {
	case res := <-inv.done:
		res.Duration = time.Since(start)
		h.release(e)
		return res, nil
	case <-e.exited:
		h.drop(e)
		return unhandled(id, "Runtime.ExitError", fmt.Sprintf("RequestId: %s Error: Runtime exited: %s", id, e.exitErr())), nil
	case <-timer.C:
		e.kill()
		h.drop(e)
		return unhandled(id, "Sandbox.Timedout", fmt.Sprintf("RequestId: %s Error: Task timed out after %.2f seconds", id, h.fn.Timeout.Seconds())), nil
	case <-ctx.Done():
		// The caller gave up; Lambda would run on, but locally we stop it so
		// that a killed invocation is really killed midway.
		e.kill()
		h.drop(e)
		return Result{}, ctx.Err()
	}
}

// Close kills every environment.
func (h *Host) Close() {
	h.mu.Lock()
	h.closed = true
	envs := make([]*env, 0, len(h.all))
	for e := range h.all {
		envs = append(envs, e)
	}
	h.mu.Unlock()
	for _, e := range envs {
		e.kill()
	}
}

func unhandled(id, typ, msg string) Result {
	body, _ := json.Marshal(map[string]string{"errorType": typ, "errorMessage": msg})
	return Result{Payload: body, FunctionError: "Unhandled", RequestID: id}
}

func (h *Host) acquire() (*env, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errors.New("host closed")
	}
	if n := len(h.idle); n > 0 {
		e := h.idle[n-1]
		h.idle = h.idle[:n-1]
		h.mu.Unlock()
		return e, nil
	}
	h.mu.Unlock()
	e, err := h.start()
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.all[e] = true
	h.mu.Unlock()
	return e, nil
}

func (h *Host) release(e *env) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		e.kill()
		return
	}
	h.idle = append(h.idle, e)
}

func (h *Host) drop(e *env) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.all, e)
}

// invocation is one event waiting for, or being handled by, an environment.
type invocation struct {
	id       string
	payload  []byte
	deadline time.Time
	done     chan Result
}

// env is one execution environment: a bootstrap process and its runtime API.
type env struct {
	next    chan *invocation
	cmd     *exec.Cmd
	srv     *http.Server
	exited  chan struct{}
	mu      sync.Mutex
	current *invocation
	waitErr error
	// served is set once the bootstrap asked for an invocation: its
	// init is done.
	served atomic.Bool
}

func (h *Host) start() (*env, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &env{next: make(chan *invocation), exited: make(chan struct{})}
	e.srv = &http.Server{Handler: e.routes(h.fn.Name)}
	go e.srv.Serve(ln)

	cmd := exec.Command(h.fn.Bootstrap)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"AWS_LAMBDA_RUNTIME_API=" + ln.Addr().String(),
		"AWS_LAMBDA_FUNCTION_NAME=" + h.fn.Name,
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=" + strconv.Itoa(h.fn.MemoryMB),
		"AWS_LAMBDA_LOG_GROUP_NAME=/aws/lambda/" + h.fn.Name,
		"AWS_REGION=" + h.fn.Region,
		"AWS_DEFAULT_REGION=" + h.fn.Region,
		"_HANDLER=bootstrap",
		"TZ=:UTC",
	}
	for k, v := range h.fn.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = h.fn.Output, h.fn.Output
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := pinned.Start(cmd); err != nil {
		e.srv.Close()
		return nil, fmt.Errorf("start bootstrap: %w", err)
	}
	h.Inits.Add(1)
	e.cmd = cmd
	go func() {
		err := cmd.Wait()
		e.mu.Lock()
		e.waitErr = err
		e.mu.Unlock()
		e.srv.Close()
		close(e.exited)
	}()
	return e, nil
}

func (e *env) kill() {
	select {
	case <-e.exited:
		// Reaped: its pid is free, and the machine's pids wrap around
		// (pid_max 32768 here): the number may be another process group's
		// by now (an agent's, killed silently).
		return
	default:
	}
	if e.cmd != nil && e.cmd.Process != nil {
		syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-e.exited
}

func (e *env) exitErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.waitErr
}

func (e *env) routes(fnName string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", func(w http.ResponseWriter, r *http.Request) {
		e.served.Store(true)
		select {
		case inv := <-e.next:
			e.mu.Lock()
			e.current = inv
			e.mu.Unlock()
			w.Header().Set("Lambda-Runtime-Aws-Request-Id", inv.id)
			w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(inv.deadline.UnixMilli(), 10))
			w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:local:000000000000:function:"+fnName)
			w.Header().Set("Lambda-Runtime-Trace-Id", "Root=1-00000000-000000000000000000000000;Sampled=0")
			w.Header().Set("Content-Type", "application/json")
			w.Write(inv.payload)
		case <-r.Context().Done():
		}
	})
	finish := func(w http.ResponseWriter, r *http.Request, failed bool) {
		id := r.PathValue("id")
		e.mu.Lock()
		inv := e.current
		if inv != nil && inv.id == id {
			e.current = nil
		}
		e.mu.Unlock()
		if inv == nil || inv.id != id {
			http.Error(w, `{"errorMessage":"unknown request id","errorType":"InvalidRequestID"}`, http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(r.Body)
		res := Result{Payload: body, RequestID: id}
		if failed {
			res.FunctionError = "Unhandled"
			if len(bytes.TrimSpace(body)) == 0 {
				res.Payload, _ = json.Marshal(map[string]string{"errorType": r.Header.Get("Lambda-Runtime-Function-Error-Type"), "errorMessage": "unknown error"})
			}
		}
		inv.done <- res
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte(`{"status":"OK"}`))
	}
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", func(w http.ResponseWriter, r *http.Request) { finish(w, r, false) })
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", func(w http.ResponseWriter, r *http.Request) { finish(w, r, true) })
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		go e.kill() // Lambda discards an environment whose init failed
	})
	return mux
}
