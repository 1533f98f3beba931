package proxytest

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestAPlainRequestAndATunnelReachMappedNamesOnlyThroughTheProxy(t *testing.T) {
	p := Start()
	defer p.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "plain "+r.Host) }))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secure") }))
	defer secure.Close()
	plainAddr := p.Map("github.proxytest", strings.TrimPrefix(plain.URL, "http://"))
	secureAddr := p.Map("blob.proxytest", strings.TrimPrefix(secure.URL, "https://"))

	proxyURL, _ := url.Parse(p.URL())
	tr := secure.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(proxyURL)
	tr.TLSClientConfig.ServerName = "example.com" // httptest's certificate names it
	client := &http.Client{Transport: tr}
	for _, c := range []struct{ url, want string }{
		{"http://" + plainAddr + "/x", "plain " + plainAddr}, // the server sees the name asked for
		{"https://" + secureAddr + "/y", "secure"},
	} {
		resp, err := client.Get(c.url)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != c.want {
			t.Errorf("%s: %q, want %q", c.url, body, c.want)
		}
	}
	if p.Count("github.proxytest") != 1 || p.Count("blob.proxytest") != 1 {
		t.Errorf("hosts %v, want each name once", p.Hosts())
	}
	// Without the proxy the names do not resolve.
	if _, err := (&http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{}}}).Get("http://" + plainAddr + "/x"); err == nil {
		t.Error("a mapped name was reached without the proxy")
	}
}
