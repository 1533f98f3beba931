package provider

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
)

// Issue 39, item 3: DescribeImages refused for access or throttled was
// reported as "not found in this region or not shared with this account",
// which sends the user to check an image that exists. Only EC2's own
// not-found answers (InvalidAMIID.*) say the image is not there; any other
// error says it could not be read, with EC2's code. Shown to fail with the
// distinction taken out of image (every error "not found").
func TestAnImageThatCannotBeReadIsNotReportedAsNotFound(t *testing.T) {
	for _, c := range []struct {
		status          int
		code, want, not string
	}{
		{403, "UnauthorizedOperation", "could not be read (DescribeImages)", "not found"},
		{503, "RequestLimitExceeded", "could not be read (DescribeImages)", "not found"},
		{400, "InvalidAMIID.NotFound", "not found in this region or not shared with this account", "could not be read"},
		{400, "InvalidAMIID.Malformed", "not found in this region or not shared with this account", "could not be read"},
	} {
		t.Run(c.code, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/xml")
				w.WriteHeader(c.status)
				w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>` + c.code +
					`</Code><Message>refused by the test</Message></Error></Errors><RequestID>r-1</RequestID></Response>`))
			}))
			defer srv.Close()
			cfg, err := awsconf.Load(t.Context(), awsconf.Options{Region: "us-east-1", Endpoint: srv.URL, AccessKeyID: "testing", SecretAccessKey: "testing", MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			r := &poolResource{configured{c: &clients{aws: cfg}}}
			_, err = r.image(t.Context(), "ami-0123456789abcdef0")
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.not) || !strings.Contains(err.Error(), "image_id") {
				t.Fatalf("DescribeImages answered %s: error %v, want %q naming image_id and not %q", c.code, err, c.want, c.not)
			}
		})
	}
}
