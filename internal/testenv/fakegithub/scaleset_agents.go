package fakegithub

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The runners of scale sets, as the scale set client looks them up and
// removes them (client.go, GetRunner, GetRunnerByName, RemoveRunner):
//
//	GET    _apis/distributedtask/pools/0/agents/{id}     → {id, name, runnerScaleSetId}
//	GET    _apis/distributedtask/pools/0/agents?agentName= → {count, value}
//	DELETE _apis/distributedtask/pools/0/agents/{id}     → 204
//
// An unknown runner is AgentNotFoundException (the client's
// RunnerNotFoundError). A busy runner is not removed:
// JobStillRunningException (the client's JobStillRunningError); its
// status, 400 here, is not documented.

// agentJSON is a runner as the client reads it (types.go, RunnerReference).
func (s *Server) agentJSON(rn *runner) map[string]any {
	return map[string]any{"id": rn.id, "name": rn.name, "runnerScaleSetId": s.ss.runners[rn.id]}
}

func (s *Server) agentFind(r *http.Request) (*runner, int, any) {
	owner, ok := s.admin(r)
	if !ok {
		st, b := unauthorized()
		return nil, st, b
	}
	rn, ok := s.runners[idParam(r, "id")]
	if !ok || !sameOwner(rn.owner, owner) {
		st, b := actionsError(http.StatusNotFound, "AgentNotFoundException", fmt.Sprintf("No agent found with identifier %s.", r.PathValue("id")))
		return nil, st, b
	}
	return rn, 0, nil
}

func (s *Server) agentGet(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn, st, b := s.agentFind(r)
	if rn == nil {
		return st, b
	}
	return http.StatusOK, s.agentJSON(rn)
}

func (s *Server) agentByName(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	owner, ok := s.admin(r)
	if !ok {
		return unauthorized()
	}
	name := query(r, "agentName")
	list := []map[string]any{}
	ids := make([]int64, 0, len(s.runners))
	for id := range s.runners {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if rn := s.runners[id]; sameOwner(rn.owner, owner) && strings.EqualFold(rn.name, name) {
			list = append(list, s.agentJSON(rn))
		}
	}
	return http.StatusOK, map[string]any{"count": len(list), "value": list}
}

func (s *Server) agentDelete(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn, st, b := s.agentFind(r)
	if rn == nil {
		return st, b
	}
	if rn.busy {
		return actionsError(http.StatusBadRequest, "JobStillRunningException", "The runner "+rn.name+" is running a job.")
	}
	s.abandon(rn, "")
	delete(s.runners, rn.id)
	s.unregistered(rn.id, "api")
	s.wake()
	return http.StatusNoContent, nil
}
