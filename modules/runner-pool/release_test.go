package runnerpool_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/releasecheck"
)

// The provider as a release ships it and the module as the registry's
// repository holds it, installed by the real terraform init: the provider
// `make install` built (no second build), packed the way .goreleaser.yml
// names a release's files (zip, binary, SHA256SUMS, manifest), laid out as
// a filesystem mirror (the packed layout), and verified against the zh:
// hash SHA256SUMS states, as an install from the registry is; the
// manifest's protocols are the ones the binary serves in its handshake
// (terraform learns them from the Registry, not from the binary); the
// module written by scripts/module-tree, standing alone. terraform validate
// then runs the packed provider. make release-check does the same with a real
// goreleaser snapshot.
func TestTheReleasedProviderAndThePublishedModuleInstallWithTerraformInit(t *testing.T) {
	install(t)
	platform := runtime.GOOS + "_" + runtime.GOARCH
	bins, _ := filepath.Glob(filepath.Join(mirrorDir, "registry.terraform.io/ghrunner/ghrunner/*", platform, "terraform-provider-ghrunner_v*"))
	if len(bins) != 1 {
		t.Fatalf("make install left %v, want one provider for %s", bins, platform)
	}
	version := filepath.Base(filepath.Dir(filepath.Dir(bins[0])))

	dist := t.TempDir()
	names := releasecheck.Pack(t, "../..", bins[0], version, dist)
	if want := fmt.Sprintf("terraform-provider-ghrunner_%s_%s.zip", version, platform); names.Archive != want ||
		names.Binary != "terraform-provider-ghrunner_v"+version || names.Checksums != "terraform-provider-ghrunner_"+version+"_SHA256SUMS" {
		t.Errorf("release names %+v, want %s holding terraform-provider-ghrunner_v%s", names, want, version)
	}
	// The Registry reads the protocols from the manifest, which SHA256SUMS
	// covers with the zip; they are the ones the binary serves.
	if want := "terraform-provider-ghrunner_" + version + "_manifest.json"; names.Manifest != want {
		t.Errorf("manifest %s, want %s", names.Manifest, want)
	}
	if sums := releasecheck.Sums(t, filepath.Join(dist, names.Checksums)); len(sums) != 2 || sums[names.Archive] == "" || sums[names.Manifest] == "" {
		t.Errorf("%s lists %v, want the zip and the manifest", names.Checksums, sums)
	}
	protocols, err := releasecheck.ManifestProtocols(filepath.Join(dist, names.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	if served := releasecheck.ServedProtocol(t, bins[0]); len(protocols) != 1 || protocols[0] != served+".0" {
		t.Errorf("the manifest names protocols %v; the provider serves protocol %s", protocols, served)
	}

	cliConfig, zh := releasecheck.Mirror(t, "../..", dist, version, t.TempDir())

	work := t.TempDir()
	if out, err := exec.Command("../../scripts/module-tree", filepath.Join(work, "runner-pool"), "v"+version).CombinedOutput(); err != nil {
		t.Fatalf("scripts/module-tree: %v\n%s", err, out)
	}
	root := fmt.Sprintf(`terraform {
  required_providers {
    ghrunner = { source = "ghrunner/ghrunner", version = %q }
  }
}

provider "ghrunner" {
  region      = "us-east-1"
  environment = "release"
}

module "runners" {
  source           = "./runner-pool"
  prefix           = "rel"
  github_parameter = "/ghrunner/github"
  pools = {
    linux = { owner = "acme", instance_types = ["c7i.large"], subnet_ids = ["subnet-0123456789abcdef0"] }
  }
}
`, version)
	if err := os.WriteFile(filepath.Join(work, "main.tf"), []byte(root), 0o644); err != nil {
		t.Fatal(err)
	}

	out, lock, err := releasecheck.Init(t, work, cliConfig, version, zh)
	if err != nil {
		t.Fatalf("terraform init: %v\n%s", err, out)
	}
	if !strings.Contains(lock, `version     = "`+version+`"`) || !strings.Contains(lock, zh) || !strings.Contains(lock, `"h1:`) {
		t.Errorf("the lock file records neither version %s nor SHA256SUMS' %s beside terraform's h1: hash:\n%s", version, zh, lock)
	}
	if out := tf(t, work, cliConfig, "validate", "-no-color"); !strings.Contains(out, "The configuration is valid") {
		t.Errorf("terraform validate: %s", out)
	}

	// A package that is not the one SHA256SUMS states is refused.
	wrong := zh[:len(zh)-1] + map[bool]string{true: "0", false: "1"}[zh[len(zh)-1] != '0']
	if out, _, err := releasecheck.Init(t, work, cliConfig, version, wrong); err == nil || !strings.Contains(out, "checksum") {
		t.Errorf("init with a lock file whose hash does not match the package: %v\n%s", err, out)
	}
}
