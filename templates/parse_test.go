package templates

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
)

// Parse inverts Render: rendering what it recovers gives the same bytes, for
// both agent sources and for scripts full of quotes, heredoc markers and
// shell syntax.
func TestParseRoundTrip(t *testing.T) {
	nasty := "#!/bin/bash\necho 'it'\\''s' \"$HOME\" `id`\ncat <<EOF\nEOF\n$(rm -rf /)\n"
	withURL := valid()
	withURL.PreRunnerScript, withURL.CleanupScript, withURL.RunnerUser = nasty, "#!/bin/sh\nrm -rf /tmp/x\n", "builder"
	withURL.Agent.Endpoint = "http://127.0.0.1:5000"
	withURL.Agent.Proxy = &config.Proxy{URL: "http://proxy.internal:3128", NoProxy: []string{".corp.example"}}
	preinstalled := valid()
	preinstalled.AgentURL, preinstalled.AgentSHA256, preinstalled.AgentPath = "", "", "/usr/local/bin/ghrunner-agent"
	for name, u := range map[string]UserData{"url": withURL, "preinstalled": preinstalled, "plain": valid()} {
		t.Run(name, func(t *testing.T) {
			first, err := Render(u)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Parse(first)
			if err != nil {
				t.Fatal(err)
			}
			if got.PreRunnerScript != u.PreRunnerScript || got.CleanupScript != u.CleanupScript || got.AgentURL != u.AgentURL ||
				got.AgentSHA256 != u.AgentSHA256 || got.AgentPath != u.AgentPath || got.Agent.Endpoint != u.Agent.Endpoint ||
				!reflect.DeepEqual(got.Agent.Proxy, u.Agent.Proxy) {
				t.Errorf("parsed %+v\nfrom %+v", got, u)
			}
			if !reflect.DeepEqual(got.Agent.Table, u.Agent.Table) {
				t.Errorf("table %q, want %q", got.Agent.Table, u.Agent.Table)
			}
			again, err := Render(got)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(first, again) {
				t.Errorf("render(parse(x)) differs from x")
			}
		})
	}
}

func TestParseRejectsForeignUserData(t *testing.T) {
	for _, in := range []string{"", "#!/bin/bash\necho hi\n", "#!/bin/bash\nlog() { echo \"ghrunner-userdata: $*\"; }\nU='x'\n"} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%q) accepted it", in)
		}
	}
}
