package releasecheck

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The release workflow as GitHub will run it: what actionlint cannot see
// (examples/workflows runs actionlint on it) because the actions are
// pinned by commit, which actionlint knows no inputs or outputs of.

// pinnedInputs are the inputs each pinned action declares, read from its
// action.yml at the pinned commit (the tag in the comment). A new pin
// fails the test until its action.yml is read again.
var pinnedInputs = map[string][]string{
	// actions/checkout v4.4.0
	"actions/checkout@11d5960a326750d5838078e36cf38b85af677262": {"repository", "ref", "token", "ssh-key", "ssh-known-hosts",
		"ssh-strict", "ssh-user", "persist-credentials", "path", "clean", "filter", "sparse-checkout", "sparse-checkout-cone-mode",
		"fetch-depth", "fetch-tags", "show-progress", "lfs", "submodules", "set-safe-directory", "github-server-url", "allow-unsafe-pr-checkout"},
	// actions/setup-go v5.6.0
	"actions/setup-go@40f1582b2485089dde7abd97c1529aa768e1baff": {"go-version", "go-version-file", "check-latest", "token", "cache",
		"cache-dependency-path", "architecture"},
	// crazy-max/ghaction-import-gpg v7.0.0 (outputs: fingerprint, keyid, name, email)
	"crazy-max/ghaction-import-gpg@2dc316deee8e90f13e1a351ab510b4d5bc0c82cd": {"gpg_private_key", "passphrase", "trust_level",
		"git_config_global", "git_user_signingkey", "git_commit_gpgsign", "git_tag_gpgsign", "git_push_gpgsign", "git_committer_name",
		"git_committer_email", "workdir", "fingerprint"},
	// goreleaser/goreleaser-action v7.2.3
	"goreleaser/goreleaser-action@f06c13b6b1a9625abc9e6e439d9c05a8f2190e94": {"distribution", "version", "version-file", "args",
		"workdir", "install-only"},
}

type step struct {
	ID, Name, Uses, Run string
	With, Env           map[string]string
	// UsesComment is the comment on the uses: line.
	UsesComment string `yaml:"-"`
}

var (
	fullPin     = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$`)
	versionNote = regexp.MustCompile(`^# v[0-9]+\.[0-9]+\.[0-9]+$`)
)

// pinError says why uses (with the comment on its line) is not an action
// pinned by a full commit SHA with its release in the comment: a tag or a
// branch can be moved to other code, a commit cannot, and the comment is
// what a reader (and an update) goes by.
func pinError(uses, comment string) error {
	if strings.HasPrefix(uses, "./") {
		return nil // this repository's own action, at the release's commit
	}
	if !fullPin.MatchString(uses) {
		return fmt.Errorf("uses: %s: want owner/repo@<40 hex digits of a commit>, not a tag, branch or short SHA", uses)
	}
	if !versionNote.MatchString(comment) {
		return fmt.Errorf("uses: %s: the comment %q must name the release pinned, as # vX.Y.Z", uses, comment)
	}
	return nil
}

func TestAnActionIsUsedOnlyPinnedByAFullCommitSHAWithItsReleaseInAComment(t *testing.T) {
	sha := "11d5960a326750d5838078e36cf38b85af677262"
	for _, c := range []struct {
		uses, comment string
		ok            bool
	}{
		{"actions/checkout@" + sha, "# v4.4.0", true},
		{"owner/repo/sub/action@" + sha, "# v1.0.0", true},
		{"./.github/actions/local", "", true},
		{"actions/checkout@v4", "", false},
		{"actions/checkout@v4.4.0", "# v4.4.0", false},
		{"actions/checkout@main", "# v4.4.0", false},
		{"actions/checkout@11d5960", "# v4.4.0", false},
		{"actions/checkout@" + strings.ToUpper(sha), "# v4.4.0", false},
		{"actions/checkout@" + sha, "", false},
		{"actions/checkout@" + sha, "# v4", false},
		{"actions/checkout@" + sha, "# latest", false},
	} {
		if err := pinError(c.uses, c.comment); (err == nil) != c.ok {
			t.Errorf("pinError(%q, %q) = %v, want ok=%v", c.uses, c.comment, err, c.ok)
		}
	}
}

// releaseJobs reads the release workflow's jobs' steps, with the comments
// on their uses: lines.
func releaseJobs(t *testing.T) map[string][]step {
	t.Helper()
	raw, err := os.ReadFile("../../../.github/workflows/release.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Jobs map[string]struct{ Steps []yaml.Node }
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("release.yml: %v", err)
	}
	jobs := map[string][]step{}
	for name, job := range doc.Jobs {
		for _, n := range job.Steps {
			var s step
			if err := n.Decode(&s); err != nil {
				t.Fatalf("release.yml, job %s: %v", name, err)
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == "uses" {
					s.UsesComment = n.Content[i+1].LineComment
				}
			}
			jobs[name] = append(jobs[name], s)
		}
	}
	return jobs
}

// goreleaserVersion is the version scripts/goreleaser-version names.
func goreleaserVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("../../../scripts/goreleaser-version").Output()
	if err != nil {
		t.Fatalf("scripts/goreleaser-version: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func TestTheReleaseWorkflowPinsEveryActionAndGivesThePinnedActionsOnlyTheirInputs(t *testing.T) {
	jobs := releaseJobs(t)
	if len(jobs["test"]) == 0 || len(jobs["provider"]) == 0 || len(jobs["module"]) == 0 {
		t.Fatalf("release.yml: jobs %v, want test, provider and module", slices.Sorted(maps.Keys(jobs)))
	}
	for job, steps := range jobs {
		for _, s := range steps {
			if s.Uses == "" {
				continue
			}
			if err := pinError(s.Uses, s.UsesComment); err != nil {
				t.Errorf("job %s: %v", job, err)
				continue
			}
			inputs, known := pinnedInputs[s.Uses]
			if !known {
				t.Errorf("job %s: %s is pinned, but its inputs are not known here: read its action.yml at that commit into pinnedInputs", job, s.Uses)
				continue
			}
			for in := range s.With {
				if !slices.Contains(inputs, in) {
					t.Errorf("job %s: %s has no input %q (its action.yml declares %v)", job, s.Uses, in, inputs)
				}
			}
		}
	}
}

// The provider job signs with the key the import step imported, and runs
// the goreleaser release scripts/goreleaser-version names: the one make
// release-check runs.
func TestTheReleaseRunsTheGoreleaserOfScriptsGoreleaserVersionAndSignsWithTheImportedKey(t *testing.T) {
	want := goreleaserVersion(t)
	var gpg, release *step
	provider := releaseJobs(t)["provider"]
	for i, s := range provider {
		switch {
		case strings.HasPrefix(s.Uses, "crazy-max/ghaction-import-gpg@"):
			gpg = &provider[i]
		case strings.HasPrefix(s.Uses, "goreleaser/goreleaser-action@"):
			release = &provider[i]
		}
	}
	if gpg == nil || release == nil {
		t.Fatalf("the provider job lacks the key's import (%v) or goreleaser's action (%v)", gpg, release)
	}
	if release.With["version"] != want || release.With["distribution"] != "goreleaser" || release.With["args"] != "release --clean" {
		t.Errorf("goreleaser's action: with %v, want distribution goreleaser, version %s (scripts/goreleaser-version), args release --clean", release.With, want)
	}
	if gpg.ID == "" || release.Env["GPG_FINGERPRINT"] != "${{ steps."+gpg.ID+".outputs.fingerprint }}" {
		t.Errorf("goreleaser's GPG_FINGERPRINT is %q, want the import step's (id %q) fingerprint output", release.Env["GPG_FINGERPRINT"], gpg.ID)
	}
	if gpg.With["gpg_private_key"] != "${{ secrets.GPG_PRIVATE_KEY }}" || gpg.With["passphrase"] != "${{ secrets.GPG_PASSPHRASE }}" {
		t.Errorf("the key's import: with %v, want the GPG_PRIVATE_KEY and GPG_PASSPHRASE secrets (docs/operations.md)", gpg.With)
	}
	if release.Env["GITHUB_TOKEN"] != "${{ secrets.GITHUB_TOKEN }}" {
		t.Errorf("goreleaser's GITHUB_TOKEN is %q, want the job's token (it writes the release)", release.Env["GITHUB_TOKEN"])
	}

}

// The agent's tests stop unless they run as root ("run it as root (CI
// does)"): the test job runs .ci/run through sudo, handing over the PATH
// setup-go made and the Go caches it restored, which sudo would reset.
func TestTheReleaseTestJobRunsTheTestsAsRootWithGoOnItsPath(t *testing.T) {
	var runs []string
	for _, s := range releaseJobs(t)["test"] {
		if strings.Contains(s.Run, ".ci/run") {
			runs = append(runs, s.Run)
		}
	}
	if len(runs) != 1 {
		t.Fatalf("the test job runs .ci/run in %d steps, want 1", len(runs))
	}
	var invoking string
	for line := range strings.Lines(runs[0]) {
		if strings.Contains(line, ".ci/run") {
			invoking = strings.TrimSpace(line)
		}
	}
	if !strings.HasPrefix(invoking, "sudo ") {
		t.Errorf("the test job runs %q, want .ci/run through sudo (as root)", invoking)
	}
	for _, handed := range []string{`"PATH=$PATH"`, `"GOCACHE=$(go env GOCACHE)"`, `"GOMODCACHE=$(go env GOMODCACHE)"`} {
		if !strings.Contains(runs[0], handed) {
			t.Errorf("the test job's step does not hand %s over to sudo:\n%s", handed, runs[0])
		}
	}
}
