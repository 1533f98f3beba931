package config

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http/httpproxy"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fielderr"
)

func TestAProxyIsRefusedNamingTheFieldAndTheRule(t *testing.T) {
	for _, c := range []struct {
		name, field string
		p           Proxy
	}{
		{"no scheme", "url", Proxy{URL: "proxy.internal:3128"}},
		{"a socks scheme", "url", Proxy{URL: "socks5://proxy.internal:1080"}},
		{"no host", "url", Proxy{URL: "http://:3128"}},
		{"credentials", "url", Proxy{URL: "http://user:secret@proxy.internal:3128"}},
		{"a path", "url", Proxy{URL: "http://proxy.internal:3128/squid"}},
		{"a query", "url", Proxy{URL: "http://proxy.internal:3128?x=1"}},
		{"a port out of range", "url", Proxy{URL: "http://proxy.internal:70000"}},
		{"a quote", "url", Proxy{URL: "http://proxy.internal'"}},
		{"a comma in a no_proxy entry", "noProxy", Proxy{URL: "http://proxy.internal:3128", NoProxy: []string{"a.example,b.example"}}},
		{"a space in a no_proxy entry", "noProxy", Proxy{URL: "http://proxy.internal:3128", NoProxy: []string{"a.example b"}}},
		{"a wildcard", "noProxy", Proxy{URL: "http://proxy.internal:3128", NoProxy: []string{"*"}}},
	} {
		err := c.p.Validate()
		e, ok := fielderr.From(err, fielderr.Operator)
		if !ok || e.Field != c.field || !strings.Contains(e.Rule, "must be") {
			t.Errorf("%s: %v, want a refusal of %s with its rule", c.name, err, c.field)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the refusal shows the password: %v", c.name, err)
		}
		cfg := valid()
		cfg.Proxy = &c.p
		if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "proxy."+c.field+":") {
			t.Errorf("%s: Validate() = %v, want proxy.%s", c.name, err, c.field)
		}
	}
	for _, p := range []Proxy{
		{URL: "http://proxy.internal:3128"}, {URL: "https://10.0.0.5:3129/"}, {URL: "http://[fd00::5]:3128"},
		{URL: "http://proxy", NoProxy: []string{".amazonaws.com", "git.corp.example:443", "10.0.0.0/8", "10.1.2.3", "fd00::1", "[fd00::1]:8080"}},
	} {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v refused: %v", p, err)
		}
	}
}

// What the variables decide, read as Go's net/http reads them (the agent
// and the fake runner are Go; curl and the runner read the same lists):
// GitHub through the proxy; IMDS, the configured AWS endpoints and what the
// operator listed directly.
func TestTheProxyCarriesGitHubAndNeverIMDSOrTheListedEndpoints(t *testing.T) {
	c := valid()
	c.Endpoint = "https://vpce-1.ec2.eu-west-1.vpce.amazonaws.com"
	c.Endpoints = map[string]string{"s3": "https://bucket.vpce-2.s3.eu-west-1.vpce.amazonaws.com"}
	c.Proxy = &Proxy{URL: "http://proxy.internal:3128", NoProxy: []string{".corp.example"}}
	env := map[string]string{}
	for _, kv := range c.ProxyEnv() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for _, k := range []string{"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"} {
		if env[k] != "http://proxy.internal:3128" {
			t.Errorf("%s=%q", k, env[k])
		}
	}
	if env["no_proxy"] != env["NO_PROXY"] || !slices.Contains(strings.Split(env["no_proxy"], ","), "169.254.169.254") {
		t.Fatalf("no_proxy=%q NO_PROXY=%q", env["no_proxy"], env["NO_PROXY"])
	}
	proxyOf := (&httpproxy.Config{HTTPProxy: env["http_proxy"], HTTPSProxy: env["https_proxy"], NoProxy: env["no_proxy"]}).ProxyFunc()
	for _, c := range []struct {
		url     string
		proxied bool
	}{
		{"https://api.github.com/repos/acme/app", true},
		{"https://pipelines.actions.githubusercontent.com/_apis/health", true},
		{"http://eu-west-1.ec2.archive.ubuntu.com/ubuntu/", true},
		{"https://dynamodb.eu-west-1.amazonaws.com/", true},
		{"http://169.254.169.254/latest/api/token", false},
		{"http://[fd00:ec2::254]/latest/api/token", false},
		{"https://vpce-1.ec2.eu-west-1.vpce.amazonaws.com/", false},
		{"https://bucket.vpce-2.s3.eu-west-1.vpce.amazonaws.com/agent", false},
		{"https://git.corp.example/", false},
	} {
		u, _ := url.Parse(c.url)
		p, err := proxyOf(u)
		if err != nil || (p != nil) != c.proxied {
			t.Errorf("%s: proxy %v (%v), want proxied %v", c.url, p, err, c.proxied)
		}
	}
	if c.Proxy = nil; c.ProxyEnv() != nil {
		t.Errorf("no proxy, yet %v", c.ProxyEnv())
	}
}
