package fakegithub

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Just-in-time runners, as GitHub serves them:
//
//	POST /orgs/{org}/actions/runners/generate-jitconfig
//	POST /repos/{owner}/{repo}/actions/runners/generate-jitconfig
//	{name, runner_group_id, labels (1-100), work_folder (default _work)}
//	→ 201 {runner, encoded_jit_config}
//
// runner_group_id is required (422 without it), an unknown group answers
// 404; the name must be free (409). encoded_jit_config is what run.sh
// --jitconfig takes: base64 of a JSON object from file name (.runner,
// .credentials, .credentials_rsaparams) to the base64 of its content,
// which the listener writes into the runner's root before it starts
// (actions/runner src/Runner.Listener/Runner.cs, "GetJitConfig"). The
// runner is ephemeral (RunnerSettings.Ephemeral): it takes one job, the
// listener then exits and deletes its local configuration, and GitHub
// removes the runner; one whose listener takes no job is removed after a
// few minutes (idle removal, below), one that never had a listener after
// a day. The configuration starts one listener: a second start is
// answered as for a deleted registration.

type jitRequest struct {
	Name          string   `json:"name"`
	RunnerGroupID *int64   `json:"runner_group_id"`
	Labels        []string `json:"labels"`
	WorkFolder    string   `json:"work_folder"`
}

func (s *Server) generateJITConfig(w http.ResponseWriter, r *http.Request) (int, any) {
	var req jitRequest
	if err := decode(r, &req); err != nil {
		return http.StatusBadRequest, apiError(http.StatusBadRequest, err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	owner := ownerOf(r)
	if status, body, ok := s.ownerDenied(r, owner); !ok {
		return status, body
	}
	if status, body, ok := s.runnersDenied(r, owner); !ok {
		return status, body
	}
	switch {
	case req.RunnerGroupID == nil:
		return invalid("Invalid input: object is missing required key: runner_group_id.")
	case req.Name == "":
		return invalid("Invalid input: object is missing required key: name.")
	case len(req.Labels) == 0 || len(req.Labels) > 100:
		return invalid("Invalid input: labels must have between 1 and 100 items.")
	}
	group, ok := s.groupName(owner, *req.RunnerGroupID)
	if !ok {
		return notFound()
	}
	s.expireJIT()
	for _, rn := range s.runners {
		if sameOwner(rn.owner, owner) && strings.EqualFold(rn.name, req.Name) {
			return http.StatusConflict, apiError(http.StatusConflict, "Already exists - A runner with the name "+req.Name+" already exists.")
		}
	}
	if req.WorkFolder == "" {
		req.WorkFolder = "_work"
	}
	// Only the labels asked for. The description's example asks for
	// "self-hosted", "X64" and "macOS" itself and its runner has exactly
	// the four labels asked (system names read-only: runnerJSON); a
	// listener started with --jitconfig only writes the configuration's
	// files (actions/runner src/Runner.Listener/Runner.cs, GetJitConfig)
	// and registers nothing, and the default labels are config.sh's alone
	// (ConfigurationManager.cs, CreateNewAgent: unless
	// --no-default-labels).
	labels := slices.Clone(req.Labels)
	s.nextID++
	rn := &runner{id: s.nextID, owner: owner, name: req.Name, os: "Linux", labels: labels, group: group,
		secret: randomToken("secret_"), jit: true, created: s.now()}
	s.runners[rn.id] = rn
	s.registered(rn)

	// No disableUpdate: generate-jitconfig takes a name, a runner group,
	// labels and a work folder, nothing else, so a just-in-time runner
	// behind the latest release is sent an update (releases.go, updateFor).
	return http.StatusCreated, map[string]any{"runner": s.runnerJSON(rn), "encoded_jit_config": s.encodeJIT(r, rn, *req.RunnerGroupID, req.WorkFolder, false)}
}

// encodeJIT is the encoded configuration of just-in-time runner rn, for
// the REST path and for scale sets (scaleset_jobs.go) alike: what
// run.sh --jitconfig takes. disableUpdate is written to .runner as
// config.sh --disableupdate writes it.
func (s *Server) encodeJIT(r *http.Request, rn *runner, poolID int64, workFolder string, disableUpdate bool) string {
	base := "http://" + r.Host
	settings := map[string]any{"agentId": rn.id, "agentName": rn.name, "poolId": poolID, "poolName": rn.group,
		"serverUrl": base + "/_fake/", "gitHubUrl": base + "/" + rn.owner, "workFolder": workFolder, "ephemeral": true}
	if disableUpdate {
		settings["disableUpdate"] = true
	}
	files := map[string]any{
		".runner":                settings,
		".credentials":           map[string]any{"scheme": "OAuth", "data": map[string]string{"clientId": randomToken("client_"), "authorizationUrl": base + "/_fake/token"}},
		".credentials_rsaparams": map[string]any{"fakeSecret": rn.secret},
	}
	encoded := map[string]string{}
	for name, v := range files {
		raw, _ := json.Marshal(v)
		encoded[name] = base64.StdEncoding.EncodeToString(raw)
	}
	raw, _ := json.Marshal(encoded)
	return base64.StdEncoding.EncodeToString(raw)
}

func invalid(msg string) (int, any) {
	return http.StatusUnprocessableEntity, apiError(http.StatusUnprocessableEntity, msg)
}

// groupName is the runner group id names for owner: an organization's
// groups by position (1 is Default), a repository's only group is Default.
func (s *Server) groupName(owner string, id int64) (string, bool) {
	if strings.Contains(owner, "/") {
		return "Default", id == 1
	}
	names := s.groups[strings.ToLower(owner)]
	if id < 1 || int(id) > len(names) {
		return "", false
	}
	return names[id-1], true
}

// groupID is the id of a runner's group (GitHub lists it with the runner).
func (s *Server) groupID(rn *runner) int {
	if i := slices.Index(s.groups[strings.ToLower(rn.owner)], rn.group); i >= 0 {
		return i + 1
	}
	return 1
}

// Idle removal. GitHub also removes a just-in-time runner whose listener
// connected but took no job: actions/runner issue #4726 (open, runner
// 2.337.0, 2026-09) reports runners removed 2 to 6 minutes after
// "Listening for Jobs", and others report a configuration valid about 5
// minutes. The limit is not documented; the fake removes such a runner
// jitIdleAfter after its first listener connected (DefaultJITIdleAfter,
// within the reported range; Options.JITIdleAfter and SetJITIdleAfter
// shorten it for tests). Its listener learns at its next poll (404), and
// the fake runner then ends as the real one does (fakerunner, listen).
const DefaultJITIdleAfter = 4 * time.Minute

// SetJITIdleAfter sets how long a just-in-time runner's listener may wait
// for a job before the runner is removed.
func (s *Server) SetJITIdleAfter(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jitIdleAfter = d
}

// expireJIT removes just-in-time runners that never had a listener within
// jitUnusedAfter, and those whose listener took no job within
// jitIdleAfter of connecting. Called with s.mu held, wherever runners are
// looked at and at every poll of a listener.
func (s *Server) expireJIT() {
	for id, rn := range s.runners {
		switch {
		case !rn.jit:
		case !rn.doneAt.IsZero():
			if s.now().Sub(rn.doneAt) >= s.ephemeralLinger {
				delete(s.runners, id)
				s.unregistered(id, "ephemeral")
			}
		case !rn.listened && s.now().Sub(rn.created) > s.jitUnusedAfter:
			delete(s.runners, id)
			s.unregistered(id, "jit-unused")
		case rn.listened && !rn.busy && s.now().Sub(rn.listenedAt) > s.jitIdleAfter:
			// Not busy, not done: a just-in-time runner that took no job.
			s.abandon(rn, "")
			delete(s.runners, id)
			s.unregistered(id, "jit-idle")
		}
	}
}

// Ephemeral linger. GitHub removes an ephemeral runner once its one job is
// over, but how soon is not documented: the runner may still be listed
// (offline, not busy) for a while after its job ended, and whoever lists
// runners then must neither count it as a live runner nor miss it as
// gone. The fake keeps it Options.EphemeralLinger (DefaultEphemeralLinger:
// a few seconds, our guess at "soon"). It takes no further job meanwhile:
// its listener ended after the job, and its configuration starts no other
// (sessionCreate).
const DefaultEphemeralLinger = 3 * time.Second

// jobDone ends an ephemeral runner's life once its one job is over: listed
// for the linger, then removed (expireJIT).
func (s *Server) jobDone(rn *runner) {
	if !rn.jit {
		return
	}
	rn.doneAt = s.now()
	if s.ephemeralLinger <= 0 {
		delete(s.runners, rn.id)
		s.unregistered(rn.id, "ephemeral")
	}
}
