package config

// The pool's outbound proxy. Invariants:
//   - one URL serves both http and https traffic, and it carries no
//     credentials: the configuration travels in the launch template's user
//     data, which anyone allowed to describe the template reads in clear;
//   - the instance metadata service (IPv4 and IPv6) and loopback are never
//     proxied, whatever the operator lists: IMDS hands out the instance
//     role, and a proxy that saw the request would see the role's keys;
//   - the AWS endpoints the pool names (agent endpoint overrides, which are
//     VPC endpoints or a sandbox) are reached directly.
//
// The variables are the conventional ones: lower case first, as the
// runner reads them (actions/runner docs/adrs/0263-proxy-support.md: the
// lower-case variable wins; read once, when the runner starts), upper case
// too for tools that read only that form (Go's net/http reads either).

import (
	"net"
	"net/url"
	"regexp"
	"strings"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fielderr"
)

// Proxy is the proxy the instance's outbound HTTP(S) goes through.
type Proxy struct {
	// URL is http(s)://host[:port] of the proxy.
	URL string `json:"url"`
	// NoProxy are hosts reached directly, added to AlwaysDirect and the
	// configured endpoints' hosts.
	NoProxy []string `json:"noProxy,omitempty"`
}

// AlwaysDirect are never proxied: IMDS (IPv4 and its IPv6 address on
// Nitro instances) and loopback.
var AlwaysDirect = []string{"169.254.169.254", "fd00:ec2::254", "localhost", "127.0.0.1", "::1"}

// The rules of the proxy's fields; the provider shows them at plan time.
const (
	ProxyURLRule = "must be http://host[:port] or https://host[:port]: a scheme of http or https, a host, no path, query or fragment, " +
		"and no user:password@ (the URL travels in the launch template's user data, readable by anyone who may describe the template; admit the instances by address instead)"
	NoProxyRule = "must be a host name, a .domain (its subdomains), an IP address or CIDR block, each optionally with :port; no spaces, commas or quotes"
)

// noProxyRE: host names and .domains of letters, digits and hyphens, IPv4
// and IPv6 addresses (bracketed when a port follows), CIDR blocks, an
// optional port. Commas would split an entry in two in no_proxy.
var noProxyRE = regexp.MustCompile(`^(\.?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*|[0-9A-Fa-f:.]+(/[0-9]{1,3})?|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$`)

// Validate names the first bad field of p (url or noProxy) and its rule.
func (p Proxy) Validate() error {
	u, err := url.Parse(p.URL)
	switch {
	case err != nil || strings.ContainsAny(p.URL, " \t\r\n'\"\\,"):
		return fielderr.New(fielderr.Operator, "url", "%q %s", p.URL, ProxyURLRule)
	case u.Scheme != "http" && u.Scheme != "https", u.Hostname() == "", u.User != nil,
		u.Path != "" && u.Path != "/", u.RawQuery != "", u.ForceQuery, u.Fragment != "", u.Opaque != "":
		// The URL is not echoed when it carries credentials.
		shown := p.URL
		if u.User != nil {
			shown = u.Scheme + "://…@" + u.Host
		}
		return fielderr.New(fielderr.Operator, "url", "%q %s", shown, ProxyURLRule)
	}
	if port := u.Port(); port != "" && !validPort(port) {
		return fielderr.New(fielderr.Operator, "url", "%q %s", p.URL, ProxyURLRule)
	}
	for _, h := range p.NoProxy {
		if len(h) > 253 || !noProxyRE.MatchString(h) {
			return fielderr.New(fielderr.Operator, "noProxy", "%q %s", h, NoProxyRule)
		}
	}
	return nil
}

func validPort(s string) bool {
	if len(s) > 5 {
		return false
	}
	n := 0
	for _, r := range s {
		n = n*10 + int(r-'0')
	}
	return n >= 1 && n <= 65535
}

// ProxyEnv is the environment that sends c's outbound HTTP(S) through its
// proxy: http_proxy, https_proxy and no_proxy in both cases, as
// "NAME=value". Empty without a proxy.
func (c Config) ProxyEnv() []string {
	if c.Proxy == nil {
		return nil
	}
	direct := append([]string{}, AlwaysDirect...)
	eps := []string{c.Endpoint}
	for _, k := range []string{"dynamodb", "ec2", "logs", "s3"} {
		eps = append(eps, c.Endpoints[k])
	}
	for _, e := range eps {
		if u, err := url.Parse(e); err == nil && u.Hostname() != "" {
			direct = append(direct, u.Hostname())
		}
	}
	direct = append(direct, c.Proxy.NoProxy...)
	var list []string
	seen := map[string]bool{}
	for _, h := range direct {
		// An IPv6 literal is written bare: curl and Go both read it so.
		if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			h = h[1 : len(h)-1]
		}
		if ip := net.ParseIP(h); ip != nil {
			h = ip.String()
		}
		if !seen[strings.ToLower(h)] {
			seen[strings.ToLower(h)] = true
			list = append(list, h)
		}
	}
	u, no := strings.TrimSuffix(c.Proxy.URL, "/"), strings.Join(list, ",")
	return []string{"http_proxy=" + u, "https_proxy=" + u, "no_proxy=" + no, "HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "NO_PROXY=" + no}
}
