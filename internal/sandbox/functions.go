package sandbox

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/lambdart"
)

// functions runs the functions terraform deployed into moto, which stores
// them but cannot run them. Each invocation reads the function back from
// moto (code hash, architecture, timeout, memory, environment) and runs the
// local bundle whose zip has that CodeSha256 through the Lambda runtime API.
type functions struct {
	lambda *lambda.Client
	assets string // provider/assets: the zips the provider embedded
	dir    string // bootstraps unpacked by code hash
	env    map[string]string
	output io.Writer
	conc   *concurrency
	// credentials issues a function's execution role credentials, as Lambda
	// puts them in the function's environment.
	credentials func(ctx context.Context, roleARN, session, instance string) (akid, secret, token string, err error)

	mu    sync.Mutex
	hosts map[string]*deployed // by function name
	calls map[string]int       // invocations by function name
}

type deployed struct {
	key  string // what the host was built from; a new deployment changes it
	host *lambdart.Host
}

// Invocation is one call through the Invoke endpoint.
type Invocation struct {
	Function string
	Result   lambdart.Result
}

func newFunctions(client *lambda.Client, assets, dir string, env map[string]string, output io.Writer, limit int) *functions {
	return &functions{lambda: client, assets: assets, dir: dir, env: env, output: output, conc: newConcurrency(limit),
		hosts: map[string]*deployed{}, calls: map[string]int{}}
}

// invoke runs one invocation of the deployed function name within the
// account's concurrency: a synchronous one (queued false) is refused with
// *errThrottled when it is used up, an event Lambda holds (queued) waits.
func (f *functions) invoke(ctx context.Context, name string, payload []byte, queued bool) (lambdart.Result, error) {
	host, reserved, err := f.host(ctx, name)
	if err != nil {
		return lambdart.Result{}, err
	}
	free, err := f.conc.acquire(ctx, name, reserved, queued)
	if err != nil {
		return lambdart.Result{}, err
	}
	defer free()
	f.mu.Lock()
	f.calls[name]++
	f.mu.Unlock()
	return host.Invoke(ctx, payload)
}

// errNoFunction maps to Lambda's 404 ResourceNotFoundException.
var errNoFunction = errors.New("function not found")

// host is the running host of the deployed function name, and its reserved
// concurrency as GetFunction reports it (-1: none).
func (f *functions) host(ctx context.Context, name string) (*lambdart.Host, int, error) {
	out, err := f.lambda.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name)})
	var nf *lambdatypes.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil, 0, fmt.Errorf("%w: %s", errNoFunction, name)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading function %s from moto: %w", name, err)
	}
	cfg := out.Configuration
	arch := "amd64"
	if len(cfg.Architectures) == 1 && cfg.Architectures[0] == lambdatypes.ArchitectureArm64 {
		arch = "arm64"
	}
	if arch != runtime.GOARCH {
		return nil, 0, fmt.Errorf("function %s is deployed for %s but this machine is %s: deploy the sandbox with architecture = %q", name, arch, runtime.GOARCH, runtime.GOARCH)
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
	sum := aws.ToString(cfg.CodeSha256)
	key := fmt.Sprintf("%s|%d|%d|%s|%v", sum, aws.ToInt32(cfg.Timeout), aws.ToInt32(cfg.MemorySize), aws.ToString(cfg.Role), sortedEnv(env))

	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.hosts[name]; d != nil && d.key == key {
		return d.host, reservedOf(out), nil
	}
	bootstrap, err := f.bootstrap(sum, arch)
	if err != nil {
		return nil, 0, fmt.Errorf("function %s: %w", name, err)
	}
	if f.credentials != nil {
		akid, secret, token, err := f.credentials(ctx, aws.ToString(cfg.Role), name, "")
		if err != nil {
			return nil, 0, fmt.Errorf("function %s: its execution role: %w", name, err)
		}
		env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], env["AWS_SESSION_TOKEN"] = akid, secret, token
	}
	host, err := lambdart.New(lambdart.Function{Name: name, Bootstrap: bootstrap, Env: env, Timeout: time.Duration(aws.ToInt32(cfg.Timeout)) * time.Second,
		MemoryMB: int(aws.ToInt32(cfg.MemorySize)), Region: env["AWS_REGION"], Output: f.output})
	if err != nil {
		return nil, 0, err
	}
	if old := f.hosts[name]; old != nil {
		old.host.Close() // redeployed: new environments from now on, as Lambda does
	}
	f.hosts[name] = &deployed{key: key, host: host}
	return host, reservedOf(out), nil
}

// bootstrap finds the local zip whose hash is the deployed code's and
// unpacks its bootstrap once.
func (f *functions) bootstrap(codeSHA256, arch string) (string, error) {
	zipPath := filepath.Join(f.assets, bundle.FunctionZip(arch))
	data, err := os.ReadFile(zipPath)
	if err != nil {
		return "", fmt.Errorf("no local bundle %s: run make build (%w)", zipPath, err)
	}
	sum := sha256.Sum256(data)
	if got := base64.StdEncoding.EncodeToString(sum[:]); got != codeSHA256 {
		return "", fmt.Errorf("deployed code %s is not the local bundle %s (%s): rebuild with make build and apply again", codeSHA256, zipPath, got)
	}
	dst := filepath.Join(f.dir, strings.NewReplacer("/", "_", "+", "-", "=", "").Replace(codeSHA256), "bootstrap")
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	r, err := zip.NewReader(strings.NewReader(string(data)), int64(len(data)))
	if err != nil {
		return "", err
	}
	for _, file := range r.File {
		if file.Name != "bootstrap" {
			continue
		}
		in, err := file.Open()
		if err != nil {
			return "", err
		}
		defer in.Close()
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		out, err := os.OpenFile(dst+".part", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			return "", err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return "", err
		}
		if err := out.Close(); err != nil {
			return "", err
		}
		return dst, os.Rename(dst+".part", dst)
	}
	return "", fmt.Errorf("%s holds no bootstrap", zipPath)
}

func (f *functions) counts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.calls {
		out[k] = v
	}
	return out
}

func (f *functions) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.hosts {
		d.host.Close()
	}
}

func sortedEnv(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
