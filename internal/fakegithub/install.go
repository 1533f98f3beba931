package fakegithub

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// BuildRunner compiles the fake runner once per process and returns its path.
func BuildRunner() (string, error) {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fakerunner")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "fakerunner")
		_, self, _, _ := runtime.Caller(0)
		cmd := exec.Command("go", "build", "-o", buildPath, ".")
		cmd.Dir = filepath.Join(filepath.Dir(self), "fakerunner")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build fake runner: %v\n%s", err, out)
		}
	})
	return buildPath, buildErr
}

// InstallRunner lays out a runner directory as the runner tarball would:
// config.sh and run.sh, here thin wrappers around the fake runner binary.
func InstallRunner(dir, binary string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	scripts := map[string]string{
		"config.sh": "#!/bin/bash\nexec '" + binary + "' config \"$@\"\n",
		"run.sh":    "#!/bin/bash\nexec '" + binary + "' run \"$@\"\n",
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			return err
		}
	}
	return nil
}
