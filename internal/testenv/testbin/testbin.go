// Package testbin builds the project's binaries for tests (once per test
// process) and collects the output of the processes tests start.
package testbin

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
)

// Module is the import path prefix of the project's packages.
const Module = "github.com/ghrunner/terraform-provider-ghrunner"

type result struct {
	path string
	err  error
}

var (
	mu    sync.Mutex
	built = map[string]*result{}
	dir   string
)

// Build compiles the main package at importPath (statically, CGO off, with
// the bundle's build tags, as shipped) once per process and returns the
// binary's path.
func Build(importPath string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if r, ok := built[importPath]; ok {
		return r.path, r.err
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "ghr-bin")
		if err != nil {
			return "", err
		}
		// Runners in the tests may run as an unprivileged user, which
		// must reach the fake runner's binary.
		if err := os.Chmod(d, 0o755); err != nil {
			return "", err
		}
		dir = d
	}
	r := &result{path: filepath.Join(dir, strings.ReplaceAll(strings.TrimPrefix(importPath, Module+"/"), "/", "-"))}
	cmd := exec.Command("go", "build", "-tags", bundle.BuildTags, "-o", r.path, importPath)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		r.err = fmt.Errorf("build %s: %v\n%s", importPath, err, out)
	}
	built[importPath] = r
	return r.path, r.err
}

// Remove deletes the binaries this process built (about 120 MB for the
// agent, the fake runner and the bundle's bootstrap): call it when the
// process is done with them, as awstest.Main does after the tests.
func Remove() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
	}
	dir, built = "", map[string]*result{}
}

// Buffer collects a process's output safely across goroutines.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
