package sandbox

import (
	"net/http"
	"testing"
)

func TestRegistryCallsNameTheirRepositoryAndTheECRActionECRChecks(t *testing.T) {
	for _, c := range []struct{ method, path, repo, action string }{
		{http.MethodGet, "/v2/", "", ""},
		{http.MethodHead, "/v2/ghrunner/listener/manifests/latest", "ghrunner/listener", "ecr:BatchGetImage"},
		{http.MethodGet, "/v2/listener/manifests/sha256:abc", "listener", "ecr:BatchGetImage"},
		{http.MethodPut, "/v2/listener/manifests/v1", "listener", "ecr:PutImage"},
		{http.MethodGet, "/v2/listener/blobs/sha256:abc", "listener", "ecr:GetDownloadUrlForLayer"},
		{http.MethodHead, "/v2/listener/blobs/sha256:abc", "listener", "ecr:BatchCheckLayerAvailability"},
		{http.MethodPost, "/v2/a/b/c/blobs/uploads/", "a/b/c", "ecr:InitiateLayerUpload"},
		{http.MethodPatch, "/v2/listener/blobs/uploads/123", "listener", "ecr:UploadLayerPart"},
		{http.MethodPut, "/v2/listener/blobs/uploads/123?digest=sha256:abc", "listener", "ecr:CompleteLayerUpload"},
		{http.MethodGet, "/v2/listener/tags/list", "listener", "ecr:ListImages"},
		{http.MethodDelete, "/v2/listener/manifests/v1", "listener", ""},
	} {
		if got := registryRepo(c.path); got != c.repo {
			t.Errorf("registryRepo(%s) = %q, want %q", c.path, got, c.repo)
		}
		if got := registryAction(c.method, c.path); got != c.action {
			t.Errorf("registryAction(%s %s) = %q, want %q", c.method, c.path, got, c.action)
		}
	}
}
