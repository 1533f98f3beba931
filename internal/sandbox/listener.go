package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
)

// Listener is the bundle run as the scale-set listener
// (GHRUNNER_HANDLER=listener): the very bootstrap binary the deployed
// functions run, as a long-lived process with the deployed provision
// function's environment and its role's credentials.
type Listener struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	mu   sync.Mutex
}

// StartListener starts a listener named name beside the deployed function
// like (the provision function: the listener provisions as it does).
func (s *Sandbox) StartListener(ctx context.Context, like, name string, logs io.Writer) (*Listener, error) {
	bin, env, err := s.functions.process(ctx, like)
	if err != nil {
		return nil, err
	}
	env["GHRUNNER_HANDLER"] = bundle.HandlerListener
	env["GHRUNNER_LISTENER_NAME"] = name
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ()[:0:0], sortedEnv(env)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the listener: %w", err)
	}
	l := &Listener{cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		close(l.done)
	}()
	return l, nil
}

// Kill ends the listener at once (SIGKILL), as a task that dies does.
func (l *Listener) Kill() {
	_ = syscall.Kill(-l.cmd.Process.Pid, syscall.SIGKILL)
	<-l.done
}

// Stop asks the listener to end (SIGTERM, as ECS stops a task) and waits
// up to wait before it kills it.
func (l *Listener) Stop(wait time.Duration) error {
	_ = l.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.done:
	case <-time.After(wait):
		l.Kill()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Exited says whether the listener ended, and how.
func (l *Listener) Exited() (bool, error) {
	select {
	case <-l.done:
		l.mu.Lock()
		defer l.mu.Unlock()
		return true, l.err
	default:
		return false, nil
	}
}

// process is what a process running the deployed function name as its
// runtime would run: its unpacked bootstrap and its environment, with its
// execution role's credentials.
func (f *functions) process(ctx context.Context, name string) (string, map[string]string, error) {
	out, err := f.lambda.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name)})
	if err != nil {
		return "", nil, fmt.Errorf("reading function %s from moto: %w", name, err)
	}
	cfg := out.Configuration
	arch := "amd64"
	if len(cfg.Architectures) == 1 && cfg.Architectures[0] == lambdatypes.ArchitectureArm64 {
		arch = "arm64"
	}
	env := map[string]string{}
	if cfg.Environment != nil {
		for k, v := range cfg.Environment.Variables {
			env[k] = v
		}
	}
	for k, v := range f.env {
		env[k] = v
	}
	bin, err := f.bootstrap(aws.ToString(cfg.CodeSha256), arch)
	if err != nil {
		return "", nil, err
	}
	if f.credentials != nil {
		akid, secret, token, err := f.credentials(ctx, aws.ToString(cfg.Role), name+"-listener", "")
		if err != nil {
			return "", nil, fmt.Errorf("function %s: its execution role: %w", name, err)
		}
		env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], env["AWS_SESSION_TOKEN"] = akid, secret, token
	}
	return bin, env, nil
}
