package pool

import "testing"

func TestMatchGlob(t *testing.T) {
	cases := []struct {
		pattern, s string
		want       bool
	}{
		{"c*", "c6i.large", true},
		{"c*", "m7i.large", false},
		{"m7i.*", "m7i.xlarge", true},
		{"m7i.*", "m7i-flex.large", false},
		{"M7I.*", "m7i.large", true}, // case-insensitive
		{"*.large", "c7g.large", true},
		{"*.large", "c7g.xlarge", false},
		{"c7g.large", "c7g.large", true},
		{"c7g.large", "c7g.largex", false},
		{"*", "anything", true},
		{"c*i*.*large", "c6in.2xlarge", true},
		{"c*i*.*large", "c6gn.large", false},
		{"c?i.large", "c6i.large", false}, // '?' is literal
		{"c[67]i.large", "c6i.large", false},
		{"", "", true},
		{"**", "", true},
		{"a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
	}
	for _, c := range cases {
		if got := MatchGlob(c.pattern, c.s); got != c.want {
			t.Errorf("MatchGlob(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
}

func TestMatcher(t *testing.T) {
	m, err := NewMatcher("on-demand", []string{"c*", "m7i.*"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		msg  Message
		want bool
	}{
		{Message{InstanceType: "c6i.large", UsageClass: "on-demand"}, true},
		{Message{InstanceType: "c6i.large", UsageClass: "spot"}, false},
		{Message{InstanceType: "m7i.large", UsageClass: "On-Demand"}, true},
		{Message{InstanceType: "r7i.large", UsageClass: "on-demand"}, false},
	} {
		if got := m.Match(c.msg); got != c.want {
			t.Errorf("Match(%+v) = %v, want %v", c.msg, got, c.want)
		}
	}
	if got := m.Allowed([]string{"r7i.large", "c7i.large", "m7i.2xlarge"}); len(got) != 2 || got[0] != "c7i.large" {
		t.Errorf("Allowed = %v", got)
	}
	if _, err := NewMatcher("reserved", nil); err == nil {
		t.Error("usage class reserved accepted")
	}
	if _, err := NewMatcher("", []string{"c*", "c7i.large; rm -rf /"}); err == nil || err.Error()[:24] != "allowedInstanceTypes[1]:" {
		t.Errorf("bad glob: %v", err)
	}
}

func FuzzMatchGlob(f *testing.F) {
	f.Add("c*", "c6i.large")
	f.Add("*.*", "m7i.large")
	f.Add("a*b*c", "abc")
	f.Fuzz(func(t *testing.T, pattern, s string) {
		got := MatchGlob(pattern, s)
		// A pattern without '*' matches exactly its own text, ignoring case.
		if !containsStar(pattern) && got != (asciiLower(pattern) == asciiLower(s)) {
			t.Fatalf("MatchGlob(%q, %q) = %v without a star", pattern, s, got)
		}
		// A pattern always matches itself once its stars are removed.
		if !MatchGlob(pattern, removeStars(pattern)) {
			t.Fatalf("MatchGlob(%q, %q) = false", pattern, removeStars(pattern))
		}
	})
}

func containsStar(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '*' {
			return true
		}
	}
	return false
}

func removeStars(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '*' {
			out = append(out, s[i])
		}
	}
	return string(out)
}
