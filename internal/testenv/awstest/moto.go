// Package awstest runs a real AWS emulator (moto server) for the tests of a
// package: start it in TestMain, point the SDK at it, stop it afterwards.
//
//	var env *awstest.Moto
//
//	func TestMain(m *testing.M) { os.Exit(awstest.Main(m, &env)) }
package awstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/pinned"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/testbin"
)

// InstallHint is printed when moto_server is missing.
const InstallHint = "moto_server not found on PATH: install it with `pip install 'moto[server]'` (or run `make test`, which does)"

// Region is the region every test talks to.
const Region = "us-east-1"

// Moto is a running moto server behind a small proxy.
//
// moto's DynamoDB is not atomic under concurrent requests (a 32-goroutine claim
// race double-claimed in 2 of 8 runs), so the proxy serialises DynamoDB
// requests: races in our tests then exercise our conditions, not moto's threads.
type Moto struct {
	URL      string // the proxy: point the SDK here
	MotoURL  string // moto itself, for its management API
	cmd      *exec.Cmd
	exited   chan struct{} // closed when moto_server has exited
	port     int           // the loopback port moto_server was told to bind
	proxy    *http.Server
	log      *testbin.Buffer
	requests atomic.Int64
	byTarget sync.Map // X-Amz-Target or Action -> *atomic.Int64
	mappings mappingStore
	// network is what NetworkContext looked up.
	networkMu sync.Mutex
	network   *Network
}

// Main starts moto, runs the tests and stops it. A missing moto_server fails
// the package with the install command; it never skips.
func Main(m *testing.M, env **Moto) int {
	e, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "awstest:", err)
		return 1
	}
	*env = e
	defer e.Stop()
	defer testbin.Remove()
	return m.Run()
}

// Start launches moto_server on a free loopback port and waits until it answers.
func Start() (*Moto, error) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, errors.New(InstallHint)
	}
	// Another process may take the port freePort found before moto binds
	// it (portowner.go): then ours exits, and another port is tried.
	var last error
	for range 5 {
		e, err := start(bin)
		if err == nil {
			return e, nil
		}
		last = err
		if !errors.Is(err, errExited) {
			break
		}
	}
	return nil, last
}

// errExited: moto_server exited before it answered (its port taken).
var errExited = errors.New("moto_server exited before it answered")

func start(bin string) (*Moto, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	e := &Moto{MotoURL: fmt.Sprintf("http://127.0.0.1:%d", port), port: port, log: &testbin.Buffer{}, exited: make(chan struct{})}
	patch, err := motoPatchDir()
	if err != nil {
		return nil, err
	}
	e.cmd = exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	e.cmd.Env = append(os.Environ(), "PYTHONPATH="+strings.Trim(patch+string(os.PathListSeparator)+os.Getenv("PYTHONPATH"), string(os.PathListSeparator)))
	e.cmd.Stdout, e.cmd.Stderr = e.log, e.log
	// Die with the test binary, even when it is killed.
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := pinned.Start(e.cmd); err != nil {
		return nil, fmt.Errorf("start moto_server: %w", err)
	}
	go func() { e.cmd.Wait(); close(e.exited) }()
	if err := e.waitReady(30 * time.Second); err != nil {
		e.Stop()
		return nil, err
	}
	if err := e.startProxy(); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

func (e *Moto) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-e.exited:
			return fmt.Errorf("%w: %s", errExited, e.log.String())
		default:
		}
		resp, err := http.Get(e.MotoURL + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			// Answered, but by ours? (portowner.go)
			if mine, _ := listensOn(e.cmd.Process.Pid, e.port); resp.StatusCode == http.StatusOK && mine {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("moto_server did not answer on %s within %s: %s", e.MotoURL, limit, e.log.String())
}

func (e *Moto) startProxy() error {
	target, _ := url.Parse(e.MotoURL)
	rp := httputil.NewSingleHostReverseProxy(target)
	// Keep connections to moto open: with Go's default of two idle ones,
	// every request beyond two at a time cost moto a new connection and
	// thread, a tenth of its CPU in our suites.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	rp.Transport = tr
	// A client that gives up mid-call (a killed Lambda, a cancelled test)
	// is routine: answer 502 without logging to stderr.
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) { w.WriteHeader(http.StatusBadGateway) }
	var dynamo sync.Mutex
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.requests.Add(1)
		if e.serveMappings(w, r) {
			return
		}
		op := r.Header.Get("X-Amz-Target")
		if op == "" {
			op = actionOf(r)
		}
		if op != "" {
			c, _ := e.byTarget.LoadOrStore(op, new(atomic.Int64))
			c.(*atomic.Int64).Add(1)
		}
		if strings.HasPrefix(op, "DynamoDB_") {
			dynamo.Lock()
			defer dynamo.Unlock()
		}
		rp.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen for the moto proxy: %w", err)
	}
	e.URL = "http://" + ln.Addr().String()
	e.proxy = &http.Server{Handler: handler}
	go e.proxy.Serve(ln)
	return nil
}

// actionOf reads the Action of a query-protocol request (EC2, old SQS) without
// consuming the body the proxy still has to forward.
func actionOf(r *http.Request) string {
	if a := r.URL.Query().Get("Action"); a != "" {
		return a
	}
	if r.Body == nil || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return ""
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return ""
	}
	v, _ := url.ParseQuery(string(body))
	return v.Get("Action")
}

// Calls returns how many requests with this X-Amz-Target (e.g.
// "DynamoDB_20120810.Query", "AmazonSQS.ReceiveMessage") or query Action
// (e.g. "DescribeInstances") went through the proxy.
func (e *Moto) Calls(op string) int64 {
	if c, ok := e.byTarget.Load(op); ok {
		return c.(*atomic.Int64).Load()
	}
	return 0
}

// Config returns an awsconf.Config pointing every service at the emulator.
func (e *Moto) Config(t testing.TB) awsconf.Config {
	t.Helper()
	cfg, err := awsconf.Load(context.Background(), e.Options())
	if err != nil {
		t.Fatalf("aws config for moto: %v", err)
	}
	return cfg
}

// Options returns awsconf.Options pointing every service at the emulator.
func (e *Moto) Options() awsconf.Options {
	return awsconf.Options{
		Region:          Region,
		Endpoint:        e.URL,
		AccessKeyID:     "testing",
		SecretAccessKey: "testing",
		MaxAttempts:     3,
	}
}

// Stop ends the proxy and moto.
func (e *Moto) Stop() {
	if e.proxy != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		e.proxy.Shutdown(ctx)
		cancel()
	}
	if e.cmd != nil && e.cmd.Process != nil {
		// moto_server runs in its own process group: end it and its children.
		syscall.Kill(-e.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-e.exited:
		case <-time.After(3 * time.Second):
			syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
			<-e.exited
		}
	}
}

// Name returns a name unique within this moto for a test's resources, so
// tests sharing one emulator never see each other's tables or queues.
func Name(t testing.TB, prefix string) string {
	n := nameSeq.Add(1)
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, t.Name())
	if len(clean) > 40 {
		clean = clean[:40]
	}
	return fmt.Sprintf("%s-%s-%d", prefix, clean, n)
}

var nameSeq atomic.Int64

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

//go:embed motopatch/sitecustomize.py
var motoPatch []byte

// motoPatchDir is the directory holding motopatch/sitecustomize.py (what it
// changes and why is in the file): named after its content, so test
// processes share one and a changed file gets a new one.
func motoPatchDir() (string, error) {
	sum := sha256.Sum256(motoPatch)
	dir := filepath.Join(os.TempDir(), "ghr-motopatch-"+hex.EncodeToString(sum[:6]))
	file := filepath.Join(dir, "sitecustomize.py")
	if old, err := os.ReadFile(file); err == nil && bytes.Equal(old, motoPatch) {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".sitecustomize-")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(motoPatch); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return dir, os.Rename(tmp.Name(), file)
}
