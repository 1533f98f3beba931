// Command mkbundle builds the artifacts the provider embeds: the Lambda
// bundle (lambdas/, zipped as "bootstrap") and the agent (agent/), stripped,
// for every architecture, into the provider's assets directory.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
)

func main() {
	out := flag.String("out", "provider/assets", "directory the artifacts are written to")
	archs := flag.String("arch", strings.Join(bundle.Architectures, ","), "comma-separated GOARCH list")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: go run ./internal/bundle/mkbundle [-out DIR] [-arch arm64,amd64]\n\n"+
			"Builds the Lambda bundle and the agent for linux, stripped and reproducible, and\n"+
			"writes %s and %s per architecture into DIR.\n\n", bundle.FunctionZip("ARCH"), bundle.Agent("ARCH"))
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*out, strings.Split(*archs, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "mkbundle:", err)
		os.Exit(1)
	}
}

func run(out string, archs []string) error {
	tmp, err := os.MkdirTemp("", "mkbundle")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, arch := range archs {
		if arch != "arm64" && arch != "amd64" {
			return fmt.Errorf("-arch: %q must be arm64 or amd64", arch)
		}
		lambda := filepath.Join(tmp, "bootstrap-"+arch)
		if err := build(arch, "./lambdas", lambda); err != nil {
			return err
		}
		data, err := os.ReadFile(lambda)
		if err != nil {
			return err
		}
		zipped, err := bundle.Zip("bootstrap", data)
		if err != nil {
			return err
		}
		if err := publish(filepath.Join(out, bundle.FunctionZip(arch)), zipped, 0o644); err != nil {
			return err
		}
		fmt.Printf("mkbundle: %s  %.1f MB (binary %.1f MB)\n", bundle.FunctionZip(arch), mb(len(zipped)), mb(len(data)))
		agent := filepath.Join(tmp, bundle.Agent(arch))
		if err := build(arch, "./agent", agent); err != nil {
			return err
		}
		if data, err = os.ReadFile(agent); err != nil {
			return err
		}
		if err := publish(filepath.Join(out, bundle.Agent(arch)), data, 0o755); err != nil {
			return err
		}
		fmt.Printf("mkbundle: %s  %.1f MB\n", bundle.Agent(arch), mb(len(data)))
	}
	return nil
}

// publish replaces dst atomically and leaves it alone when it already holds
// data: test packages run `make install` in parallel, and a compile that
// embeds the folder must never see half a file.
func publish(dst string, data []byte, mode os.FileMode) error {
	if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, data) {
		return nil
	}
	f, err := os.CreateTemp(filepath.Dir(dst), ".mkbundle-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), dst)
}

// build compiles pkg for linux/arch without cgo, stripped, with paths and
// build ids removed so the same source gives the same bytes.
func build(arch, pkg, dst string) error {
	start := time.Now()
	cmd := exec.Command("go", "build", "-tags", bundle.BuildTags, "-trimpath", "-buildvcs=false", "-ldflags", "-s -w -buildid=", "-o", dst, pkg)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	fmt.Printf("mkbundle: building %s for linux/%s ...\n", pkg, arch)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s for %s: %w", pkg, arch, err)
	}
	fmt.Printf("mkbundle: built %s for linux/%s in %.1fs\n", pkg, arch, time.Since(start).Seconds())
	return nil
}

func mb(n int) float64 { return float64(n) / (1 << 20) }
