package templates

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
)

// Issue 40 item 6: the pool's proxy reaches what the user data fetches
// itself (the agent from S3, nftables through the package manager), while
// the IMDS requests ask curl for no proxy at all. curl reads http_proxy,
// https_proxy and no_proxy from its environment (curl(1), ENVIRONMENT);
// dnf and apt read them too. The stand-ins record what they were given.
func TestThePoolsProxyReachesTheUserDatasFetchesAndNotIMDS(t *testing.T) {
	agent := []byte("#!/bin/sh\necho fake agent\n")
	sum := sha256.Sum256(agent)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := newCloud(t, agent, cancel)
	u := valid()
	u.AgentURL, u.AgentSHA256, u.Region = c.URL+"/ghr/ghrunner-agent", hex.EncodeToString(sum[:]), "eu-west-1"
	u.Agent.IMDSEndpoint = c.URL
	u.Agent.Proxy = &config.Proxy{URL: "http://proxy.internal:3128", NoProxy: []string{".corp.example"}}
	script, err := Render(u)
	if err != nil {
		t.Fatal(err)
	}
	b := newBox(t, boxOptions{firewall: "dnf"})
	env := filepath.Join(b.dir, "env.log")
	record := func(name string) string {
		return fmt.Sprintf(`echo "%s https_proxy=${https_proxy:-} http_proxy=${http_proxy:-} no_proxy=${no_proxy:-}" >>%q`, name, env)
	}
	realCurl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl not found: install it with `apt-get install -y curl`")
	}
	b.stub(t, "curl", record("curl")+"\nexec "+fmt.Sprintf("%q", realCurl)+` "$@"`)
	dnf, err := os.ReadFile(filepath.Join(b.bin, "dnf"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(dnf), "\n")
	_, body, _ = strings.Cut(body, "\n") // its own call record, written again by stub
	b.stub(t, "dnf", record("dnf")+"\n"+body)

	out, err := b.run(ctx, t, script)
	if errs, _ := c.report(); len(errs) > 0 || err != nil {
		t.Fatalf("user data failed: %v %v\n%s", errs, err, out)
	}
	raw, _ := os.ReadFile(env)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	var sawDnf, sawCurl bool
	for _, l := range lines {
		if !strings.Contains(l, " https_proxy=http://proxy.internal:3128 http_proxy=http://proxy.internal:3128 ") ||
			!strings.Contains(l, "169.254.169.254") || !strings.HasSuffix(l, ",.corp.example") {
			t.Errorf("a fetch without the pool's proxy: %s", l)
		}
		sawDnf = sawDnf || strings.HasPrefix(l, "dnf ")
		sawCurl = sawCurl || strings.HasPrefix(l, "curl ")
	}
	if !sawDnf || !sawCurl {
		t.Fatalf("want dnf and curl recorded, got:\n%s", raw)
	}
	// Every IMDS request says --noproxy '*'; the S3 download does not.
	for _, call := range b.callLog() {
		imds := strings.Contains(call, "/latest/")
		if strings.HasPrefix(call, "curl ") && imds != strings.Contains(call, "--noproxy *") {
			t.Errorf("IMDS request and --noproxy disagree: %s", call)
		}
	}
}
