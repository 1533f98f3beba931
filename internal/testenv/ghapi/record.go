package ghapi

import (
	"bytes"
	"io"
	"net/http"
	"sync"
)

// Exchange is one request and its answer, as they crossed the wire.
type Exchange struct {
	Method, Path, RawQuery string
	RequestBody            []byte
	Status                 int
	ContentType            string
	ResponseBody           []byte
	// Direct: sent by a test on purpose (bad input, other credentials),
	// not by our client: its request is not held to the description.
	Direct bool
}

// Recorder is an http.RoundTripper that keeps every exchange.
type Recorder struct {
	Next   http.RoundTripper // nil: http.DefaultTransport
	Direct bool              // mark what it records as Direct

	mu        sync.Mutex
	exchanges []Exchange
}

// RoundTrip sends the request and records it with its answer.
func (rec *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	next := rec.Next
	if next == nil {
		next = http.DefaultTransport
	}
	var reqBody []byte
	if req.Body != nil {
		var err error
		if reqBody, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	rec.mu.Lock()
	rec.exchanges = append(rec.exchanges, Exchange{
		Method: req.Method, Path: req.URL.Path, RawQuery: req.URL.RawQuery, RequestBody: reqBody,
		Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), ResponseBody: body, Direct: rec.Direct,
	})
	rec.mu.Unlock()
	return resp, nil
}

// Exchanges returns what was recorded so far.
func (rec *Recorder) Exchanges() []Exchange {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]Exchange(nil), rec.exchanges...)
}
