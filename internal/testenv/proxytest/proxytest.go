// Package proxytest is a small forward HTTP proxy for tests: plain http
// requests in absolute form (RFC 9112 §3.2.2) are forwarded, CONNECT
// (RFC 9110 §9.3.6) opens a tunnel, and each host asked for is counted.
//
// A test names its servers under a top-level domain only the proxy
// resolves (Map): a client that reaches such a name can only have come
// through the proxy, so the request succeeding proves the proxy was used,
// not only the count.
package proxytest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Proxy is a running proxy.
type Proxy struct {
	srv *httptest.Server
	tr  *http.Transport

	mu    sync.Mutex
	names map[string]string // name → host:port it stands for
	hosts map[string]int    // host asked for (without port) → requests or tunnels
}

// Start starts a proxy; Close it when done.
func Start() *Proxy {
	p := &Proxy{names: map[string]string{}, hosts: map[string]int{}}
	p.tr = &http.Transport{Proxy: nil, DialContext: p.dial, DisableCompression: true}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// URL is the proxy's own URL, for http_proxy and https_proxy.
func (p *Proxy) URL() string { return p.srv.URL }

// Close stops the proxy.
func (p *Proxy) Close() { p.srv.Close(); p.tr.CloseIdleConnections() }

// Map makes name (a host name, no port) stand for target (host:port), and
// returns name:port, the address clients use. Names no resolver knows
// (under .proxytest) keep clients from going around the proxy.
func (p *Proxy) Map(name, target string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, port, _ := net.SplitHostPort(target)
	p.names[net.JoinHostPort(name, port)] = target
	return net.JoinHostPort(name, port)
}

// Count is how many requests and tunnels asked for host (without port).
func (p *Proxy) Count(host string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hosts[host]
}

// Hosts are the hosts asked for so far, with their counts.
func (p *Proxy) Hosts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for h, n := range p.hosts {
		out[h] = n
	}
	return out
}

func (p *Proxy) note(hostport string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	p.hosts[host]++
	if t, ok := p.names[hostport]; ok {
		return t
	}
	return hostport
}

func (p *Proxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	p.mu.Lock()
	if t, ok := p.names[addr]; ok {
		addr = t
	}
	p.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.tunnel(w, r)
		return
	}
	// A request to the proxy itself, not in absolute form, is no proxy
	// request: a client that mistook the proxy for the server.
	if !r.URL.IsAbs() {
		http.Error(w, "proxytest: not a proxy request (want an absolute URL)", http.StatusBadRequest)
		return
	}
	p.note(r.URL.Host)
	out := r.Clone(r.Context())
	out.RequestURI = ""
	// Hop-by-hop headers stay with this hop (RFC 9110 §7.6.1).
	for _, h := range []string{"Proxy-Connection", "Proxy-Authorization", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
		out.Header.Del(h)
	}
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		http.Error(w, "proxytest: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request) {
	target := p.note(r.Host)
	up, err := p.dial(r.Context(), "tcp", target)
	if err != nil {
		http.Error(w, "proxytest: "+err.Error(), http.StatusBadGateway)
		return
	}
	down, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		return
	}
	fmt.Fprint(down, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, buf); closeWrite(up); done <- struct{}{} }()
	go func() { io.Copy(down, up); closeWrite(down); done <- struct{}{} }()
	go func() {
		<-done
		<-done
		up.Close()
		down.Close()
	}()
}

// closeWrite half-closes c when it can, so the other side reads EOF.
func closeWrite(c net.Conn) {
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
		return
	}
	c.SetDeadline(time.Now())
}
