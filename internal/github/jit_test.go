package github

import "testing"

func TestInstanceOfReadsEveryRunnerNameOfOurs(t *testing.T) {
	for name, want := range map[string]string{
		"ghr-3-i-0abc123":    "i-0abc123", // config.sh, third use
		"ghr-3-12-i-0abc123": "i-0abc123", // the 12th just-in-time runner of the third use
		"ghr-x-i-0abc123":    "",
		"ghr-3-i-0abc123-x":  "",
		"someone-i-0abc123":  "",
	} {
		got, ok := InstanceOf(name)
		if got != want || ok != (want != "") {
			t.Errorf("InstanceOf(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}
