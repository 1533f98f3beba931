package sandbox

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// S3's own checks of a SigV4 request, before any authorization: every
// x-amz-* header it carries must be signed ("AccessDenied: There were
// headers present in the request which were not signed", with the
// unsigned ones in HeadersNotSigned), and x-amz-content-sha256 must be
// there ("InvalidRequest: Missing required header for this request:
// x-amz-content-sha256"). curl's --aws-sigv4 before 7.86 signed only host
// and x-amz-date, so its downloads with role credentials (a session token
// header) failed this way (issue 30, item 4). The S3 API reference's
// authentication pages state both; the answers' exact form is the one
// users quote.

// s3SignatureRefusal says why S3 refuses r's signature ("" when it does
// not), with the HTTP status and error code it answers.
func s3SignatureRefusal(r *http.Request) (status int, code, msg string) {
	auth := r.Header.Get("Authorization")
	i := strings.Index(auth, "SignedHeaders=")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") || i < 0 {
		return 0, "", "" // query-string (presigned) or another scheme: not modelled
	}
	list, _, _ := strings.Cut(auth[i+len("SignedHeaders="):], ",")
	signed := strings.Split(strings.TrimSpace(list), ";")
	var unsigned []string
	for name := range r.Header {
		h := strings.ToLower(name)
		if strings.HasPrefix(h, "x-amz-") && !slices.Contains(signed, h) {
			unsigned = append(unsigned, h)
		}
	}
	if len(unsigned) > 0 {
		slices.Sort(unsigned)
		return http.StatusForbidden, "AccessDenied", fmt.Sprintf("There were headers present in the request which were not signed (HeadersNotSigned: %s)", strings.Join(unsigned, ", "))
	}
	if r.Header.Get("X-Amz-Content-Sha256") == "" {
		return http.StatusBadRequest, "InvalidRequest", "Missing required header for this request: x-amz-content-sha256"
	}
	return 0, "", ""
}
