package sandbox

import (
	"net/http"
	"testing"
)

// What S3 refuses of a SigV4 request whatever the policies: an x-amz-*
// header left out of the signature (what curl before 7.86 sent with role
// credentials), and a missing x-amz-content-sha256.
func TestS3RefusesUnsignedAmzHeadersAndAMissingContentHash(t *testing.T) {
	req := func(signed string, headers ...string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/bucket/agent/x", nil)
		r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=ASIAX/20261127/us-east-1/s3/aws4_request, SignedHeaders="+signed+", Signature=00")
		for i := 0; i+1 < len(headers); i += 2 {
			r.Header.Set(headers[i], headers[i+1])
		}
		return r
	}
	old := req("host;x-amz-date", "X-Amz-Date", "20261127T000000Z", "X-Amz-Security-Token", "tok", "X-Amz-Content-Sha256", "e3b0")
	if status, code, msg := s3SignatureRefusal(old); status != 403 || code != "AccessDenied" || msg != "There were headers present in the request which were not signed (HeadersNotSigned: x-amz-content-sha256, x-amz-security-token)" {
		t.Errorf("curl before 7.86: %d %s %q", status, code, msg)
	}
	if status, code, _ := s3SignatureRefusal(req("host;x-amz-date", "X-Amz-Date", "20261127T000000Z")); status != 400 || code != "InvalidRequest" {
		t.Errorf("no content hash: %d %s", status, code)
	}
	good := req("host;x-amz-content-sha256;x-amz-date;x-amz-security-token", "X-Amz-Date", "20261127T000000Z", "X-Amz-Security-Token", "tok", "X-Amz-Content-Sha256", "e3b0")
	if status, _, msg := s3SignatureRefusal(good); status != 0 {
		t.Errorf("a request signing all its x-amz headers: %d %s", status, msg)
	}
}
