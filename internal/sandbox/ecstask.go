package sandbox

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	ghimage "github.com/ghrunner/terraform-provider-ghrunner/internal/image"
)

// How the sandbox starts one ECS task as a process: its image pulled from
// the sandbox registry and unpacked, its environment and the task role's
// credentials endpoint (see ecs.go for what the runner of services does).

// startTask starts one task of the task definition def for the service.
func (t *ecsTasks) startTask(ctx context.Context, sv *ecsService, def string) (*ecsTask, error) {
	out, err := t.ecs.DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String(def)})
	if err != nil {
		return nil, fmt.Errorf("reading the task definition: %w", err)
	}
	td := out.TaskDefinition
	if len(td.ContainerDefinitions) != 1 {
		return nil, fmt.Errorf("%d containers: the sandbox runs task definitions of one container", len(td.ContainerDefinitions))
	}
	c := td.ContainerDefinitions[0]
	id := randomHex(16)
	// Fargate pulls a private ECR image and writes awslogs as the task
	// execution role ("Amazon ECS task execution IAM role", Amazon ECS
	// Developer Guide).
	execRole := aws.ToString(td.ExecutionRoleArn)
	if execRole == "" {
		return nil, errors.New("no executionRoleArn: Fargate pulls the image from ECR and writes awslogs as the task execution role")
	}
	akid, secret, token, err := t.credentials(ctx, execRole, id, "")
	if err != nil {
		return nil, fmt.Errorf("the task execution role: %w", err)
	}
	execCfg, err := t.roleConfig(ctx, akid, secret, token)
	if err != nil {
		return nil, err
	}
	root, cfg, err := t.pull(ctx, aws.ToString(c.Image), execCfg)
	if err != nil {
		return nil, err
	}
	argv := append(append([]string(nil), cfg.Config.Entrypoint...), cfg.Config.Cmd...)
	if len(c.EntryPoint) > 0 { // as docker: an entrypoint of the container's drops the image's command too
		argv = append([]string(nil), c.EntryPoint...)
		if len(c.Command) > 0 {
			argv = append(argv, c.Command...)
		}
	} else if len(c.Command) > 0 {
		argv = append(append([]string(nil), cfg.Config.Entrypoint...), c.Command...)
	}
	if len(argv) == 0 || !path.IsAbs(argv[0]) {
		return nil, fmt.Errorf("image %s: the sandbox runs an entrypoint given as an absolute path in the image, not %q", aws.ToString(c.Image), argv)
	}
	bin := filepath.Join(root, filepath.FromSlash(argv[0]))
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("image %s has no %s", aws.ToString(c.Image), argv[0])
	}

	env := map[string]string{}
	for _, kv := range cfg.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for _, kv := range c.Environment {
		env[aws.ToString(kv.Name)] = aws.ToString(kv.Value)
	}
	for k, v := range t.env {
		env[k] = v
	}
	env["AWS_DEFAULT_REGION"] = t.env["AWS_REGION"]
	env["AWS_EXECUTION_ENV"] = "AWS_ECS_FARGATE"
	if role := aws.ToString(td.TaskRoleArn); role != "" && t.credentials != nil {
		akid, secret, token, err := t.credentials(ctx, role, id, "")
		if err != nil {
			return nil, fmt.Errorf("the task role: %w", err)
		}
		auth := randomHex(24)
		t.mu.Lock()
		t.creds[id] = taskCredentials{token: auth, akid: akid, secret: secret, session: token, roleARN: role, expires: time.Now().Add(6 * time.Hour)}
		t.mu.Unlock()
		env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = t.credURL + id
		env["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = auth
	}

	dir := filepath.Join(t.dir, "tasks", id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out2, flush := t.output(sv, id, c, admin.Logs(execCfg))
	// Each task has a host name of its own, as on Fargate (awsvpc: the
	// task's ENI's private DNS name); the listener names itself by it.
	host := taskHostname(id, t.env["AWS_REGION"])
	env["HOSTNAME"] = host
	var cmd *exec.Cmd
	if utsNamespaces() {
		cmd = exec.Command("unshare", append([]string{"--uts", "--", "/bin/sh", "-c", `printf %s "$0" > /proc/sys/kernel/hostname && exec "$@"`, host, bin}, argv[1:]...)...)
	} else {
		t.warnOnce("uts", "sandbox: ecs: tasks share this machine's host name (a task's own needs root and unshare --uts)")
		cmd = exec.Command(bin, argv[1:]...)
		cmd.Args[0] = argv[0]
	}
	cmd.Env = sortedEnv(env)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out2, out2
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	stop := ecsDefaultStopTimeout
	if c.StopTimeout != nil {
		stop = time.Duration(*c.StopTimeout) * time.Second
	}
	task := &ecsTask{ECSTask: ECSTask{ID: id, Cluster: sv.cluster, Service: sv.name, TaskDefinition: def}, cmd: cmd, done: make(chan struct{}), stopTimeout: stop, flush: flush}

	// The invariant of minimumHealthyPercent 0 / maximumPercent 100: never
	// two tasks of a service at once.
	t.mu.Lock()
	if n := t.running[sv.arn]; n > 0 {
		v := fmt.Sprintf("%s: a task of %s was to start while %d ran", sv.name, def, n)
		t.violations = append(t.violations, v)
		t.mu.Unlock()
		flush()
		return nil, errors.New(v)
	}
	if err := cmd.Start(); err != nil {
		t.mu.Unlock()
		flush()
		return nil, err
	}
	t.running[sv.arn]++
	t.starts[sv.name]++
	task.PID, task.Started = cmd.Process.Pid, time.Now()
	sv.task = task
	t.events = append(t.events, ECSTaskEvent{Kind: "start", Service: sv.name, TaskID: id, TaskDefinition: def, PID: task.PID, At: task.Started})
	t.mu.Unlock()
	fmt.Fprintf(t.logs, "sandbox: ecs: %s/%s: task %s of %s started (pid %d)\n", sv.cluster, sv.name, id, def, task.PID)

	go func() {
		err := cmd.Wait()
		flush()
		t.mu.Lock()
		t.running[sv.arn]--
		if sv.task == task {
			sv.task = nil
		}
		delete(t.creds, id)
		t.events = append(t.events, ECSTaskEvent{Kind: "exit", Service: sv.name, TaskID: id, TaskDefinition: def, PID: task.PID, At: time.Now()})
		t.mu.Unlock()
		fmt.Fprintf(t.logs, "sandbox: ecs: %s/%s: task %s exited: %v\n", sv.cluster, sv.name, id, err)
		close(task.done)
		os.RemoveAll(dir)
	}()
	return task, nil
}

// pull fetches the image ref from the sandbox's registry and unpacks its
// layers into a folder (once per digest); it returns the folder and the
// image's configuration.
func (t *ecsTasks) pull(ctx context.Context, image string, as awsconf.Config) (string, *v1.ConfigFile, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return "", nil, fmt.Errorf("image %q: %w", image, err)
	}
	if ref.Context().RegistryStr() != t.registry.host {
		return "", nil, fmt.Errorf("image %s: the sandbox pulls from its ECR registry %s only", image, t.registry.host)
	}
	auth, _, err := ghimage.ECRAuth(ctx, ecr.NewFromConfig(as.AWS, func(o *ecr.Options) { o.BaseEndpoint = as.Endpoint("ecr") }))
	if err != nil {
		return "", nil, fmt.Errorf("pull %s: %w", image, err)
	}
	img, err := remote.Image(ref, remote.WithAuth(auth), remote.WithContext(ctx))
	if err != nil {
		return "", nil, fmt.Errorf("pull %s: %w", image, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return "", nil, fmt.Errorf("image %s: %w", image, err)
	}
	if cfg.Architecture != "" && cfg.Architecture != runtime.GOARCH {
		return "", nil, fmt.Errorf("image %s is for %s but this machine is %s", image, cfg.Architecture, runtime.GOARCH)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", nil, err
	}
	root := filepath.Join(t.dir, "images", digest.Hex)
	t.pullMu.Lock()
	defer t.pullMu.Unlock()
	if _, err := os.Stat(root); err == nil {
		return root, cfg, nil
	}
	part := root + ".part"
	os.RemoveAll(part)
	if err := unpack(mutate.Extract(img), part); err != nil {
		return "", nil, fmt.Errorf("image %s: %w", image, err)
	}
	return root, cfg, os.Rename(part, root)
}

// unpack writes a flattened image's directories, regular files and
// symbolic links under root; other entries (devices, fifos) are skipped.
func unpack(rc io.ReadCloser, root string) error {
	defer rc.Close()
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		rel := path.Clean("/" + h.Name) // never outside root
		if rel == "/" {
			continue
		}
		dst := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777|0o200)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, dst); err != nil {
				return err
			}
		}
	}
}

// serveCredentials answers the SDKs' container credential provider for a
// task, when the Authorization header is the task's token.
func (t *ecsTasks) serveCredentials(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("task")
	t.mu.Lock()
	c, ok := t.creds[id]
	t.mu.Unlock()
	if !ok || r.Header.Get("Authorization") != c.token {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]string{"code": "InvalidToken", "message": "no task with that id and authorization token"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"AccessKeyId": c.akid, "SecretAccessKey": c.secret, "Token": c.session,
		"Expiration": c.expires.UTC().Format(time.RFC3339), "RoleArn": c.roleARN})
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// taskHostname is a Fargate-like host name for a task: ip-10-0-X-Y.<region>.compute.internal.
func taskHostname(id, region string) string {
	b, _ := hex.DecodeString(id[:4])
	return fmt.Sprintf("ip-10-0-%d-%d.%s.compute.internal", b[0], b[1], region)
}

var (
	utsOnce sync.Once
	utsOK   bool
)

// utsNamespaces says whether a task can be given a host name of its own:
// root, and unshare(1) can make a UTS namespace here.
func utsNamespaces() bool {
	utsOnce.Do(func() {
		utsOK = os.Getuid() == 0 && exec.Command("unshare", "--uts", "--", "/bin/sh", "-c", "printf %s probe > /proc/sys/kernel/hostname").Run() == nil
	})
	return utsOK
}
