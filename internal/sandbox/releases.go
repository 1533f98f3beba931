package sandbox

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// Runner releases in the sandbox: the fake github.com publishes actions/runner
// releases (each one the fake runner packed as that version), and refresh asks
// for the latest every RunnerReleasesEvery instead of every hour, so that a
// release published mid-story or mid-chaos reaches the pools within a refresh.

// RunnerReleasesEvery is the functions' GHRUNNER_RUNNER_RELEASES_EVERY in
// the sandbox: the story invokes refresh itself right after publishing,
// and the chaos suite's refreshes come every 2-5 s.
const RunnerReleasesEvery = 2 * time.Second

// functionEnv is what the sandbox adds to every function's environment:
// the endpoint and credentials, and the releases' interval.
func functionEnv(aws map[string]string) map[string]string {
	env := maps.Clone(aws)
	env["GHRUNNER_RUNNER_RELEASES_EVERY"] = RunnerReleasesEvery.String()
	return env
}

// PublishRunnerRelease publishes actions/runner version on the fake
// github.com now: releases/latest answers it with its checksums, its
// tarballs are the fake runner that says it is version, and listeners
// behind it that may update are sent update messages from now on.
func (s *Sandbox) PublishRunnerRelease(version string) error {
	tarball, err := fakegithub.RunnerTarballOf(s.runnerBin, version)
	if err != nil {
		return err
	}
	s.GitHub.PublishRunnerRelease(version, tarball, time.Now())
	return nil
}

// NextRunnerRelease is a version newer than every release this provider
// pins: the next minor after the newest.
func NextRunnerRelease() string {
	newest := runnerrelease.Versions()[0]
	parts := strings.Split(newest, ".")
	minor, _ := strconv.Atoi(parts[1])
	return fmt.Sprintf("%s.%d.0", parts[0], minor+1)
}
