package sandbox

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/lambdart"
)

// A synchronous Invoke holds its connection, with no byte either way, for
// as long as the function runs. NAT gateways drop a connection idle for
// 350 s (then answer the next packet with a reset, or say nothing: the
// caller waits forever), load balancers and proxies sooner, and callers
// from GitHub Actions report resets after 4 to 5 minutes; the Lambda Invoke
// API reference warns of long synchronous calls. With
// Faults.InvokeIdleReset the endpoint plays that drop: a synchronous
// Invoke with no answer after that long has its connection reset (TCP RST,
// as the caller sees it when the gateway has forgotten the connection).
// The invocation runs on, as in Lambda, whose invocation does not end when
// its caller goes; its answer is dropped. (Without this fault a caller
// that goes kills its invocation: the chaos suite kills provisions so.)

type invokeDone struct {
	res lambdart.Result
	err error
}

// serveInvokeIdle is serveInvoke's synchronous call under InvokeIdleReset.
func (s *Sandbox) serveInvokeIdle(w http.ResponseWriter, r *http.Request, name string, payload []byte, idle time.Duration) {
	done := make(chan invokeDone, 1)
	go func() {
		res, err := s.functions.invoke(context.WithoutCancel(r.Context()), name, payload, false)
		done <- invokeDone{res, err}
	}()
	t := time.NewTimer(idle)
	defer t.Stop()
	select {
	case d := <-done:
		s.answerInvoke(w, d.res, d.err)
	case <-t.C:
		s.mu.Lock()
		s.invokeResets++
		s.mu.Unlock()
		resetConn(w)
	}
}

// resetConn closes the connection under w with a TCP RST.
func resetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler) // closes the connection all the same
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// InvokeResets is how many synchronous Invokes had their idle connection
// reset (Faults.InvokeIdleReset).
func (s *Sandbox) InvokeResets() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.invokeResets
}
