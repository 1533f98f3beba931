package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// The fake runner's HTTP calls to the fake GitHub, and a sleep that ends
// with its context.

var client = &http.Client{Timeout: 30 * time.Second}

// call sends a JSON request and decodes a JSON answer into out; it returns
// the status and, for an error status, GitHub's message.
func call(ctx context.Context, method, u, auth, session string, body, out any) (int, string, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(raw))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", auth)
	req.Header.Set("User-Agent", userAgent())
	if session != "" {
		req.Header.Set("X-Runner-Session", session)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode >= 300 {
		var msg struct{ Message string }
		json.Unmarshal(data, &msg)
		if (resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusForbidden) && out != nil {
			json.Unmarshal(data, out) // a session conflict's retry timing, a refusal's kind
		}
		return resp.StatusCode, msg.Message, nil
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, "", err
		}
	}
	return resp.StatusCode, "", nil
}

func callRaw(ctx context.Context, method, u, auth string, body any) (int, []byte, string, error) {
	raw, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(raw))
	if err != nil {
		return 0, nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", auth)
	req.Header.Set("User-Agent", userAgent())
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, data, resp.Header.Get("X-GitHub-Request-Id"), nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}
