package fakegithub

import (
	"os"
	"path/filepath"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testbin"
)

// BuildRunner compiles the fake runner once per process and returns its path.
func BuildRunner() (string, error) {
	return testbin.Build(testbin.Module + "/internal/fakegithub/fakerunner")
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
