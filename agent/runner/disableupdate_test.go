package runner

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// A server that does not keep --disableupdate (some GitHub Enterprise
// Server releases: config.sh then fails with ConfigurationManager.cs's
// "does not support configuring a self-hosted runner with 'DisableUpdate'
// flag", after the runner was added) still gets its runner: Configure
// registers it again without the flag (--replace takes over the one the
// failed attempt left) and says so in the File. Against github.com the
// flag is kept.
func TestAServerThatDoesNotKeepDisableUpdateStillGetsItsRunner(t *testing.T) {
	t.Setenv("RUNNER_ALLOW_RUNASROOT", "1") // the tests run as root; the agent gives config.sh a user on EC2
	for _, c := range []struct {
		name          string
		keeps         bool
		disableUpdate bool
	}{{"github.com", true, true}, {"a server without the flag", false, false}} {
		t.Run(c.name, func(t *testing.T) {
			fake := fakegithub.NewServer(fakegithub.Options{Orgs: []string{"acme"}, NoDisableUpdate: !c.keeps})
			t.Cleanup(fake.Close)
			gh, err := github.New(github.Config{BaseURL: fake.URL(), AppID: fake.AppID, PrivateKeyPEM: fake.PrivateKeyPEM})
			if err != nil {
				t.Fatal(err)
			}
			tok, _, err := gh.RegistrationToken(context.Background(), "acme")
			if err != nil {
				t.Fatal(err)
			}
			base := t.TempDir()
			r := &Runner{Install: fakegithub.NewRunnerDir(t), Dir: filepath.Join(base, "copy"), WorkDir: filepath.Join(base, "work"), StateDir: t.TempDir()}
			if err := r.Seal(); err != nil {
				t.Fatal(err)
			}
			f, err := r.Configure(context.Background(), Registration{URL: fake.URL() + "/acme", Token: tok, Name: "ghr-1-i-0abc", Labels: "run-1"})
			if err != nil {
				t.Fatalf("configure: %v", err)
			}
			if f.DisableUpdate != c.disableUpdate || f.AgentID == 0 {
				t.Errorf("configured %+v, want disableUpdate %v", f, c.disableUpdate)
			}
			if rs := fake.Runners(); len(rs) != 1 || rs[0].Name != "ghr-1-i-0abc" {
				t.Errorf("the server holds %+v, want the one runner", rs)
			}
		})
	}
}
