package pool

import (
	"fmt"
	"strings"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// MatchGlob reports whether s matches pattern, ignoring ASCII case. '*' matches any
// run of characters (also none); every other character, '?' and '[' included,
// matches itself only, so an instance type can never be mistaken for syntax.
func MatchGlob(pattern, s string) bool {
	// ASCII folding only: instance types are ASCII, and Unicode folding would
	// map distinct invalid bytes to the same replacement rune.
	p, v := asciiLower(pattern), asciiLower(s)
	// Classic two-pointer matching with backtracking to the last '*'.
	pi, vi := 0, 0
	star, mark := -1, 0
	for vi < len(v) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, vi
			pi++
		case pi < len(p) && p[pi] == v[vi]:
			pi++
			vi++
		case star >= 0:
			pi = star + 1
			mark++
			vi = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// Matcher selects the pool messages a provision may claim.
type Matcher struct {
	UsageClass string   // "spot" or "on-demand"; empty matches both
	Types      []string // globs; empty matches every type
}

// NewMatcher validates a request's usage class and instance type globs.
func NewMatcher(usageClass string, globs []string) (Matcher, error) {
	if usageClass != "" && !state.ValidUsageClass(usageClass) {
		return Matcher{}, fmt.Errorf("usageClass: %q must be spot or on-demand", usageClass)
	}
	for i, g := range globs {
		if err := ValidateGlob(g); err != nil {
			return Matcher{}, fmt.Errorf("allowedInstanceTypes[%d]: %w", i, err)
		}
	}
	return Matcher{UsageClass: usageClass, Types: globs}, nil
}

// ValidateGlob accepts 1-64 characters of letters, digits, '.', '-' and '*'.
func ValidateGlob(g string) error {
	if g == "" {
		return fmt.Errorf("%q must be 1-64 characters", g)
	}
	if len(g) > 64 {
		// Only the start is repeated: the message goes back to the caller.
		return fmt.Errorf("%q… (%d bytes) must be 1-64 characters", g[:64], len(g))
	}
	for _, r := range g {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '*') {
			return fmt.Errorf("%q may hold only letters, digits, '.', '-' and '*'", g)
		}
	}
	return nil
}

// Match reports whether a pool message satisfies the matcher.
func (m Matcher) Match(msg Message) bool {
	if m.UsageClass != "" && !strings.EqualFold(m.UsageClass, msg.UsageClass) {
		return false
	}
	return m.AllowsType(msg.InstanceType)
}

// AllowsType reports whether an instance type matches one of the globs.
func (m Matcher) AllowsType(instanceType string) bool {
	if len(m.Types) == 0 {
		return true
	}
	for _, g := range m.Types {
		if MatchGlob(g, instanceType) {
			return true
		}
	}
	return false
}

// Allowed returns the types of a pool the matcher allows, in the pool's order:
// the overrides a launch may use. Empty means the globs match none of them.
func (m Matcher) Allowed(poolTypes []string) []string {
	var out []string
	for _, t := range poolTypes {
		if m.AllowsType(t) {
			out = append(out, t)
		}
	}
	return out
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}
