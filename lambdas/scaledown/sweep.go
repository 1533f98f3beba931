package scaledown

import (
	"sort"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Ghost is a runner the sweep deletes: named after an instance of this
// deployment that is gone or retired, offline and idle on GitHub. Such
// runners are left behind by a deregistration that failed (GitHub down, the
// runner busy at the time, a run cut off) and would otherwise stay until
// GitHub drops them on its own, weeks later.
type Ghost struct {
	Owner      string `json:"owner"`
	RunnerID   int64  `json:"runnerId"`
	Name       string `json:"name"`
	InstanceID string `json:"instanceId"`
	Reason     string `json:"reason"`
}

// GhostCandidates picks from the listings the runners that may be ghosts:
// named ghr-<uses>-<instance id>, offline and not busy, whose instance is
// not among the live EC2 instances or has no live record. The runners of a
// live record are left to its own decision. A candidate is deleted only
// once ConfirmGhost agrees on a record read after the listing, since the
// records of Input were read before it.
func GhostCandidates(in Input) []Ghost {
	live := make(map[string]bool, len(in.Instances))
	for _, inst := range in.Instances {
		live[inst.ID] = true
	}
	owners := make([]string, 0, len(in.Runners))
	for owner := range in.Runners {
		owners = append(owners, owner)
	}
	sort.Strings(owners)
	var out []Ghost
	for _, owner := range owners {
		for _, r := range in.Runners[owner] {
			id, ok := github.InstanceOf(r.Name)
			if !ok || r.Online() || r.Busy {
				continue
			}
			if rec := in.Records[id]; live[id] && rec != nil && rec.State != state.Terminated {
				continue
			}
			out = append(out, Ghost{Owner: owner, RunnerID: r.ID, Name: r.Name, InstanceID: id})
		}
	}
	return out
}

// ConfirmGhost decides on a candidate from its instance's record as read
// after the runner listing (nil: there is none) and whether the instance
// is a live EC2 instance of this deployment.
//
// A terminated record never comes back, so its runners are dead. A live
// record may be newer than the EC2 listing (a launch since) and is left
// alone. No record at all proves the runner dead only for an instance of
// this deployment: the agent registers with material its record holds, and
// records go only by their TTL long after termination. An unknown instance
// may be another deployment's that shares the owner: never touched.
func ConfirmGhost(g Ghost, rec *state.Instance, inEC2 bool) (Ghost, bool) {
	switch {
	case rec != nil && rec.State == state.Terminated:
		g.Reason = "offline runner of an instance whose record is terminated"
		return g, true
	case rec == nil && inEC2:
		g.Reason = "offline runner of an instance of this deployment that has no record"
		return g, true
	}
	return g, false
}
