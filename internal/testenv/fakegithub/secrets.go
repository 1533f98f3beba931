package fakegithub

// Secrets lists every credential the fake has handed out and still knows:
// installation tokens, registration and remove tokens, the runner-tenant
// tokens config.sh exchanges them for, the Actions OIDC tokens minted, and the listener secrets of the
// runners registered now. Tests grep logs and outputs for them.
func (s *Server) Secrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range []map[string]tokenInfo{s.instTokens, s.runnerTokens, s.tenantTokens} {
		for tok := range m {
			out = append(out, tok)
		}
	}
	out = append(out, s.idTokens()...)
	for pat := range s.pats {
		out = append(out, pat)
	}
	for _, rn := range s.runners {
		if rn.secret != "" {
			out = append(out, rn.secret)
		}
	}
	return out
}
