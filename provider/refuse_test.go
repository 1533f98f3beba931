package provider

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/terraform"
)

// refusing stands in front of moto for one service and answers the first
// request of one operation with an error AWS gives and moto never does.
type refusing struct {
	url   string
	asked atomic.Int32
}

// refuseFirst serves AWS JSON-protocol requests: the first one whose
// X-Amz-Target is target gets a 400 with body (and X-Amzn-Query-Error when
// queryError is set); everything else goes to moto.
func refuseFirst(t *testing.T, target, queryError, body string) *refusing {
	t.Helper()
	u, _ := url.Parse(env.URL)
	moto := httputil.NewSingleHostReverseProxy(u)
	p := &refusing{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") == target && p.asked.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			if queryError != "" {
				w.Header().Set("X-Amzn-Query-Error", queryError)
			}
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, body)
			return
		}
		moto.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

// config points one service of the provider configuration in hcl at the proxy.
func (p *refusing) config(service, hcl string) string {
	return strings.Replace(hcl, fmt.Sprintf("%-9s = %q", service, env.URL), fmt.Sprintf("%-9s = %q", service, p.url), 1)
}

// retried checks the operation was asked again after the refusal.
func (p *refusing) retried(*terraform.State) error {
	if n := p.asked.Load(); n < 2 {
		return fmt.Errorf("asked %d times, want a retry after the refusal", n)
	}
	return nil
}
