package provider

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/templates"
)

// Issue 40 item 6: a pool's proxy reaches the agent's configuration in the
// user data (with the pool's S3 endpoint direct), and reads back as it was
// set, so a refresh shows no change.
func TestAPoolsProxyReachesTheUserDataAndReadsBack(t *testing.T) {
	r := &poolResource{configured{c: &clients{}}}
	noProxy, _ := types.ListValueFrom(t.Context(), types.StringType, []string{".corp.example"})
	proxy := types.ObjectValueMust(poolProxyType.AttrTypes, map[string]attr.Value{"url": types.StringValue("http://proxy.internal:3128"), "no_proxy": noProxy})
	eps, _ := types.MapValueFrom(t.Context(), types.StringType, map[string]string{"s3": "https://vpce-0a1b2c3d4e5f6a7b8-abcdefgh.s3.eu-west-1.vpce.amazonaws.com"})
	m := poolModel{Proxy: proxy, AgentEndpoints: eps, AgentEndpoint: types.StringNull(), AgentPath: types.StringNull(), RunnerUser: types.StringValue("ghrunner"),
		PreRunnerScript: types.StringNull(), CleanupScript: types.StringNull(), RunnerVersion: types.StringNull(), RunnerTarballURL: types.StringNull(),
		RunnerTarballSHA: types.StringNull(), InstanceRoleID: types.StringValue("AROAPOOLPROXY00000001"), LogGroup: types.StringValue("/ghrunner/prod/linux")}
	url := r.objectURL(m, "ghr-prod-agent-1", "agent/abc/ghrunner-agent")
	raw, err := r.userData(m, "amd64", "ghr-state", "eu-west-1", strings.Repeat("0", 64), url)
	if err != nil {
		t.Fatal(err)
	}
	u, err := templates.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if want := (&config.Proxy{URL: "http://proxy.internal:3128", NoProxy: []string{".corp.example"}}); !reflect.DeepEqual(u.Agent.Proxy, want) {
		t.Fatalf("agent proxy %+v, want %+v", u.Agent.Proxy, want)
	}
	if !strings.Contains(string(raw), "'no_proxy=169.254.169.254,") || !slices.ContainsFunc(u.Agent.ProxyEnv(), func(kv string) bool {
		return strings.HasPrefix(kv, "no_proxy=") && strings.Contains(kv, ",vpce-0a1b2c3d4e5f6a7b8-abcdefgh.s3.eu-west-1.vpce.amazonaws.com,")
	}) {
		t.Errorf("the user data does not send IMDS and the S3 endpoint direct: %v", u.Agent.ProxyEnv())
	}
	if back := proxyValue(t.Context(), u.Agent.Proxy); !back.Equal(m.Proxy) {
		t.Errorf("read back %s, set %s", back, m.Proxy)
	}
	if back := proxyValue(t.Context(), nil); !back.IsNull() {
		t.Errorf("no proxy reads back as %s", back)
	}
}
