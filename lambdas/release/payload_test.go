package release

import (
	"errors"
	"regexp"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fielderr"
)

var fuzzRunIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// FuzzReleasePayload: ParsePayload never panics, refuses with a short
// *fielderr.Error, and accepts only a label-safe runId.
func FuzzReleasePayload(f *testing.F) {
	f.Add([]byte(`{"runId":"1234567890"}`))
	f.Add([]byte(`{"runId":"$(id)"}`))
	f.Add([]byte(`{"runId":"1","runId":"2"}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		in, err := ParsePayload(payload)
		if err != nil {
			var ie *fielderr.Error
			if !errors.As(err, &ie) || len(err.Error()) > 512 {
				t.Fatalf("%q: %T of %d bytes: %.300v", payload, err, len(err.Error()), err)
			}
			return
		}
		if !fuzzRunIDRE.MatchString(in.RunID) {
			t.Fatalf("accepted runId %q", in.RunID)
		}
	})
}
