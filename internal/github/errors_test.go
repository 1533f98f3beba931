package github

import (
	"net/http"
	"testing"

	gh "github.com/google/go-github/v62/github"
)

// Issue 31, item 6: GitHub's 422 means "still running a job" only when a
// runner is deleted (DELETE …/runners/{id}); on any other call it is bad
// input (the OpenAPI descriptions' validation failure), and treating it
// as busy would have a caller wait for something that never passes.
func TestA422IsBusyOnlyWhenARunnerIsDeleted(t *testing.T) {
	answer := func(method string) error {
		req, _ := http.NewRequest(method, "https://api.github.com/orgs/acme/actions/runners/7", nil)
		return &gh.ErrorResponse{Response: &http.Response{StatusCode: http.StatusUnprocessableEntity, Request: req}, Message: "Validation Failed"}
	}
	if err := classify(answer(http.MethodDelete)); !IsBusy(err) {
		t.Errorf("422 to a DELETE: %v, want busy", err)
	}
	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodPut} {
		if err := classify(answer(m)); IsBusy(err) || err == nil {
			t.Errorf("422 to a %s: %v, want a plain error", m, err)
		}
	}
}
