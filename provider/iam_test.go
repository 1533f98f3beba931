package provider

import (
	"strings"
	"testing"
)

// Role and profile names fit IAM's 64 characters without two long names
// colliding, and the same input always gives the same name.
func TestIAMName(t *testing.T) {
	if got := iamName("ghr-prod-fn-provision"); got != "ghr-prod-fn-provision" {
		t.Errorf("short name changed: %q", got)
	}
	long := "ghr-" + strings.Repeat("platform-", 8)
	a, b := iamName(long+"linux-x64"), iamName(long+"linux-arm64")
	if len(a) != 64 || len(b) != 64 || a == b || !strings.HasPrefix(a, long[:55]) {
		t.Errorf("long names: %q %q", a, b)
	}
	if iamName(long+"linux-x64") != a {
		t.Error("not deterministic")
	}
}
