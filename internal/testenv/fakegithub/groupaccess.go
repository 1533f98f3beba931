package fakegithub

import "strings"

// GroupAccess is which repositories a runner group admits, as GitHub's
// runner-groups-org object says it: visibility "all" (every repository
// of the organization; the Default group's, and a new group's unless
// chosen otherwise), "selected" or "private", and whether public
// repositories may use it (false by default: GitHub's docs, "Managing
// access to self-hosted runners using groups").
type GroupAccess struct {
	Visibility               string
	AllowsPublicRepositories bool
}

// SetRunnerGroupAccess sets who org's runner group name admits (the
// Default group is named "Default").
func (s *Server) SetRunnerGroupAccess(org, name string, a GroupAccess) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(org)
	if _, ok := s.groups[key]; !ok {
		s.groups[key] = []string{"Default"}
	}
	s.groupAccess[strings.ToLower(org+"/"+name)] = a
}
