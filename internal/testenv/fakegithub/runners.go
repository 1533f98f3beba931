package fakegithub

import (
	"slices"
	"sort"
	"time"
)

// The runners as tests see them: their registrations through config.sh,
// the registered runners, and a runner added, made busy, online or held by
// a listener without a fake runner behind it.

// RunnerInfo is a runner as tests see it.
type RunnerInfo struct {
	ID     int64
	Owner  string
	Name   string
	Labels []string
	Group  string
	Online bool
	Busy   bool
	JIT    bool // made by generate-jitconfig: ephemeral
}

// Registration is one registration of a runner through config.sh, from
// the registration (or a --replace) until its deletion or replacement.
type Registration struct {
	RunnerID int64
	Name     string
	Labels   []string
	From, To time.Time // To is zero while it lasts
	// Online is when the runner's first listener session began (zero if
	// none did): the moment GitHub could hand it a job.
	Online time.Time
	// EndedBy says what ended it: "api" (DELETE through the REST API, as
	// the control plane deletes runners), "runner" (config.sh remove, as
	// the agent deregisters) or "replaced" (a later config.sh --replace).
	EndedBy string
}

// History returns every registration made through config.sh, in order.
func (s *Server) History() []Registration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Registration, len(s.history))
	for i, r := range s.history {
		r.Labels = slices.Clone(r.Labels)
		out[i] = r
	}
	return out
}

// registered and unregistered keep the history. Called with s.mu held.
func (s *Server) registered(rn *runner) {
	s.unregistered(rn.id, "replaced")
	reg := Registration{RunnerID: rn.id, Name: rn.name, Labels: slices.Clone(rn.labels), From: time.Now()}
	s.history = append(s.history, reg)
	if s.onRegister != nil {
		s.onRegister(reg)
	}
}

// OnRegister calls f for every registration config.sh makes, before
// config.sh hears that it succeeded: a test can act at that very moment
// (nothing the runner or its agent does next can come first). f must not
// call the server.
func (s *Server) OnRegister(f func(Registration)) {
	s.mu.Lock()
	s.onRegister = f
	s.mu.Unlock()
}

func (s *Server) unregistered(id int64, by string) {
	for i := len(s.history) - 1; i >= 0; i-- {
		if s.history[i].RunnerID == id && s.history[i].To.IsZero() {
			s.history[i].To, s.history[i].EndedBy = time.Now(), by
		}
	}
}

// cameOnline notes a registration's first listener. Called with s.mu held.
func (s *Server) cameOnline(id int64) {
	for i := len(s.history) - 1; i >= 0; i-- {
		if s.history[i].RunnerID == id && s.history[i].To.IsZero() && s.history[i].Online.IsZero() {
			s.history[i].Online = time.Now()
		}
	}
}

// Runners lists the registered runners, by id.
func (s *Server) Runners() []RunnerInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireJIT()
	out := make([]RunnerInfo, 0, len(s.runners))
	for _, r := range s.runners {
		out = append(out, s.info(r))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *Server) info(r *runner) RunnerInfo {
	return RunnerInfo{ID: r.id, Owner: r.owner, Name: r.name, Labels: slices.Clone(r.labels), Group: r.group, Online: s.online(r), Busy: r.busy, JIT: r.jit}
}

// Runner returns one runner.
func (s *Server) Runner(id int64) (RunnerInfo, bool) {
	for _, r := range s.Runners() {
		if r.ID == id {
			return r, true
		}
	}
	return RunnerInfo{}, false
}

// AddRunner registers a runner directly, with no listener behind it, for
// tests of the REST side. It is online until OfflineAfter passes (or as
// SetOnline says).
func (s *Server) AddRunner(owner, name string, busy bool, labels ...string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	s.runners[s.nextID] = &runner{id: s.nextID, owner: owner, name: name, os: "Linux", labels: labels, group: "Default", busy: busy, lastSeen: s.now(), secret: randomToken("cred"), permanent: true}
	return s.nextID
}

// SetBusy sets a runner's busy flag.
func (s *Server) SetBusy(id int64, busy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.runners[id]; ok {
		r.busy = busy
	}
}

// SetOnline marks a runner as just heard from (true) or silent (false).
func (s *Server) SetOnline(id int64, online bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.runners[id]; ok {
		r.lastSeen = time.Time{}
		if online {
			r.lastSeen = s.now()
		}
	}
}

// HoldSession plays a listener that holds a session of runner id and was
// heard from just now, taking no job: what whoever holds a runner's
// credentials can do without running its listener.
func (s *Server) HoldSession(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.runners[id]; ok {
		if r.session == "" {
			r.session = randomToken("held")
		}
		r.lastSeen = s.now()
	}
}
