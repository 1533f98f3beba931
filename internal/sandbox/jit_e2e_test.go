package sandbox_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/release"
)

// leakScript is a job that prints what it can see: its environment, and
// the environment and command line of every process it may read.
const leakScript = `env; for p in /proc/[0-9]*; do tr '\0' '\n' <$p/environ 2>/dev/null; tr '\0' ' ' <$p/cmdline 2>/dev/null; echo; done`

// TestE2E_NoGitHubTokenReachesAJITInstance plays a workflow of several
// jobs on a just-in-time pool (the module's default) and then looks, on
// each of its instances, everywhere a token could be: every attribute of
// the record, the launch template's user data, every file under the
// instance's folders, the environment and command line of the agent and
// of every process of the runner user, and what the jobs themselves could
// read. No token GitHub issued (installation, registration or remove) may
// be there, and none of the runner kinds may have been asked for.
func TestE2E_NoGitHubTokenReachesAJITInstance(t *testing.T) {
	t.Parallel()
	sb, d, fn := deployed(t)
	ctx := context.Background()
	var prov provision.Output
	invoke(t, fn, d.Functions[bundle.HandlerProvision], `{"runId":"78001","pool":"linux","instanceCount":2}`, &prov)
	if prov.Status != "ready" || len(prov.Instances) != 2 {
		t.Fatalf("provision: %+v", prov)
	}
	var outputs []string
	runners := map[string]bool{}
	for i := 0; i < 5; i++ {
		j := runJob(t, sb.URL, "78001", leakScript)
		if j.Result != "succeeded" {
			t.Fatalf("job %d: %+v", i, j)
		}
		runners[j.Runner] = true
		outputs = append(outputs, j.Output)
	}
	if len(runners) != 5 {
		t.Errorf("5 jobs ran on %d runners, want one just-in-time runner each: %v", len(runners), runners)
	}

	tokens := sb.GitHub.IssuedTokens()
	if len(tokens) == 0 {
		t.Fatal("GitHub issued no token at all: the scan proves nothing")
	}
	for _, route := range []string{"POST /orgs/{org}/actions/runners/registration-token", "POST /orgs/{org}/actions/runners/remove-token"} {
		if n := sb.GitHub.Count(route); n != 0 {
			t.Errorf("%s asked for %d times in a just-in-time deployment", route, n)
		}
	}
	var places []string // "where: text"
	store := state.New(sb.AWS.DynamoDB(), d.Table)
	for _, in := range prov.Instances {
		rec, err := store.FindInstance(ctx, in.InstanceID)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(rec)
		places = append(places, "record "+in.InstanceID+": "+string(raw))
		a := sb.Agent(in.InstanceID)
		if a == nil {
			t.Fatalf("no agent for %s", in.InstanceID)
		}
		filepath.WalkDir(a.Dir, func(path string, e fs.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				if info, _ := e.Info(); info != nil && info.Size() < 1<<20 {
					b, _ := os.ReadFile(path)
					places = append(places, "file "+path+": "+string(b))
				}
			}
			return nil
		})
		pids := []int{a.PID()}
		if u, err := user.Lookup(a.User); err == nil {
			uid, _ := strconv.Atoi(u.Uid)
			pids = append(pids, processesOf(uint32(uid))...)
		}
		for _, pid := range pids {
			for _, f := range []string{"environ", "cmdline"} {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
				places = append(places, fmt.Sprintf("process %d %s: %s", pid, f, b))
			}
		}
	}
	cfg, err := store.GetPoolConfig(ctx, "linux")
	if err != nil {
		t.Fatal(err)
	}
	lt, err := sb.AWS.EC2().DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(cfg.LaunchTemplateID), Versions: []string{"$Default"}})
	if err != nil || len(lt.LaunchTemplateVersions) != 1 {
		t.Fatalf("launch template: %v", err)
	}
	ud, _ := base64.StdEncoding.DecodeString(aws.ToString(lt.LaunchTemplateVersions[0].LaunchTemplateData.UserData))
	places = append(places, "user data: "+string(ud))
	for i, o := range outputs {
		places = append(places, fmt.Sprintf("job %d output: %s", i, o))
	}
	for _, p := range places {
		for _, tok := range tokens {
			if strings.Contains(p, tok) {
				where, _, _ := strings.Cut(p, ": ")
				t.Errorf("a GitHub token (%s…) in %s", tok[:6], where)
			}
		}
	}
	t.Logf("scanned %d places on %d instances for %d tokens", len(places), len(prov.Instances), len(tokens))

	var rel release.Output
	invoke(t, fn, d.Functions[bundle.HandlerRelease], `{"runId":"78001"}`, &rel)
	if len(rel.Released) != 2 {
		t.Fatalf("release: %+v", rel)
	}
	for _, rn := range sb.GitHub.Runners() {
		if inst, _ := github.InstanceOf(rn.Name); inst != "" {
			t.Errorf("runner %s still registered after release", rn.Name)
		}
	}
}

// processesOf lists the pids of uid's processes.
func processesOf(uid uint32) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+e.Name(), &st) == nil && st.Uid == uid {
			out = append(out, pid)
		}
	}
	return out
}
