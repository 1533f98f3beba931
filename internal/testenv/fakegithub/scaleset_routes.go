package fakegithub

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// The Actions-service side of the runner scale set protocol, as the
// client github.com/actions/scaleset (v0.4.0) speaks it. The fake is held
// to that client: every route here is exercised through the library
// itself (scaleset_test.go), never through a hand-written client.
//
// How the client finds the service (client.go, updateTokenIfNeeded): with
// a GitHub App it takes an installation token (POST
// /app/installations/{id}/access_tokens), a registration token for the
// config URL's owner (POST /orgs/{org}/actions/runners/registration-token),
// and exchanges that at POST /actions/runner-registration ("RemoteAuth
// <token>", {url, runner_event: "register"}) for {url, token}: the Actions
// service's root and an admin token, whose expiry the client reads from
// the token's JWT "exp" claim (actionsServiceAdminTokenExpiresAt). A
// config URL on any host but github.com, www.github.com, github.localhost
// and *.ghe.com is taken for GitHub Enterprise Server (config.go,
// gitHubAPIURL): its API is <scheme>://<host>/api/v3, which the fake
// serves, and the scheme is kept, so the fake's plain http URL works
// without TLS. ScaleSetConfigURL is such a URL.
//
// The fake's Actions service root is <fake>/_fake/, the same tenant root
// the fake runner is given; the client joins its paths to it and adds
// ?api-version=6.0-preview, which the fake ignores. Its errors carry the
// service's {typeName, message} body, which the client maps to its own
// errors for AgentExistsException, AgentNotFoundException and
// JobStillRunningException (errors.go, newRequestResponseError).
//
//	GET    _apis/runtime/runnergroups/?groupName=        scaleset_routes.go
//	GET    _apis/runtime/runnerscalesets?runnerGroupId=&name=
//	GET    _apis/runtime/runnerscalesets/{id}
//	POST   _apis/runtime/runnerscalesets                 create
//	PATCH  _apis/runtime/runnerscalesets/{id}            update
//	DELETE _apis/runtime/runnerscalesets/{id}
//	POST   _apis/runtime/runnerscalesets/{id}/sessions   scaleset_session.go
//	PATCH  _apis/runtime/runnerscalesets/{id}/sessions/{sid}   refresh
//	DELETE _apis/runtime/runnerscalesets/{id}/sessions/{sid}
//	GET    <messageQueueUrl>?lastMessageId=              long poll
//	DELETE <messageQueueUrl>/{messageId}                 acknowledge
//	POST   _apis/runtime/runnerscalesets/{id}/acquirejobs
//	POST   _apis/runtime/runnerscalesets/{id}/generatejitconfig   scaleset_jobs.go
//	GET    _apis/distributedtask/pools/0/agents/{id}, ?agentName=; DELETE …/{id}

const (
	ssRoot    = "/_fake/_apis/runtime/runnerscalesets"
	agentRoot = "/_fake/_apis/distributedtask/pools/0/agents"
	// authActions: the route checks the admin or message queue token itself.
	authActions = "actions"
)

// ScaleSetConfigURL is the GitHub config URL a scale set client is built
// with for owner ("acme" or "acme/api"): the fake's root and the owner,
// which the client takes for a GitHub Enterprise Server's.
func (s *Server) ScaleSetConfigURL(owner string) string { return s.srv.URL + "/" + owner }

// InstallationID is the id of the App's installation covering owner ("acme"
// or "acme/api"; 0: none), what a scale set client is built with beside
// the App id (as ClientID) and PrivateKeyPEM.
func (s *Server) InstallationID(owner string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.installations {
		if in.covers(owner) {
			return in.id
		}
	}
	return 0
}

func (s *Server) scaleSetRoutes(route func(pattern, auth string, h handler, query ...string)) {
	route("GET /_fake/_apis/runtime/runnergroups/{$}", authActions, s.ssRunnerGroups, "groupName")
	route("GET "+ssRoot, authActions, s.ssList, "runnerGroupId", "name")
	route("GET "+ssRoot+"/{id}", authActions, s.ssGet)
	route("POST "+ssRoot, authActions, s.ssCreate)
	route("PATCH "+ssRoot+"/{id}", authActions, s.ssUpdate)
	route("DELETE "+ssRoot+"/{id}", authActions, s.ssDelete)
	route("POST "+ssRoot+"/{id}/sessions", authActions, s.ssSessionCreate)
	route("PATCH "+ssRoot+"/{id}/sessions/{sid}", authActions, s.ssSessionRefresh)
	route("DELETE "+ssRoot+"/{id}/sessions/{sid}", authActions, s.ssSessionDelete)
	route("GET /_fake/scalesets/{id}/sessions/{sid}/messages", authActions, s.ssGetMessage, "lastMessageId")
	route("DELETE /_fake/scalesets/{id}/sessions/{sid}/messages/{mid}", authActions, s.ssDeleteMessage)
	route("POST "+ssRoot+"/{id}/acquirejobs", authActions, s.ssAcquireJobs)
	route("POST "+ssRoot+"/{id}/generatejitconfig", authActions, s.ssGenerateJIT)
	route("GET "+agentRoot, authActions, s.agentByName, "agentName")
	route("GET "+agentRoot+"/{id}", authActions, s.agentGet)
	route("DELETE "+agentRoot+"/{id}", authActions, s.agentDelete)
}

// tenantKey signs the tokens /actions/runner-registration hands out.
var tenantKey = func() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}()

// newTenantToken is the token /actions/runner-registration hands out: a
// JWT, as the real one is (the scale set client reads its "exp"; the fake
// runner treats it as opaque). The fake signs it with a key of its own;
// nobody verifies the signature, the fake looks the token up.
func newTenantToken(now, expires time.Time) string {
	claims := jwt.RegisteredClaims{
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(expires),
		ID:        randomToken(""),
		Issuer:    "fakegithub",
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(tenantKey)
	if err != nil {
		panic(err)
	}
	return tok
}

// actionsError is the Actions service's error body (errors.go,
// actionsExceptionError: {typeName, message}).
func actionsError(status int, typeName, msg string) (int, any) {
	return status, map[string]any{"typeName": typeName, "message": msg}
}

// admin returns the owner whose admin token the request carries. The
// caller holds s.mu.
func (s *Server) admin(r *http.Request) (string, bool) {
	info, ok := s.tenant(r, "register")
	return info.owner, ok
}

func unauthorized() (int, any) {
	return actionsError(http.StatusUnauthorized, "VssUnauthorizedException", "Bad credentials")
}

func (s *Server) ssRunnerGroups(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	owner, ok := s.admin(r)
	if !ok {
		return unauthorized()
	}
	names := []string{"Default"}
	if !strings.Contains(owner, "/") {
		names = s.groups[strings.ToLower(owner)]
	}
	// Group names compare without regard to case: the library asks for
	// "default" (types.go, DefaultRunnerGroup), the group is "Default".
	want := query(r, "groupName")
	var list []map[string]any
	for i, n := range names {
		if strings.EqualFold(n, want) {
			list = append(list, map[string]any{"id": i + 1, "name": n, "isDefaultGroup": i == 0})
		}
	}
	return http.StatusOK, map[string]any{"count": len(list), "value": list}
}

// ssFind returns the scale set of the path's {id} if the admin token's
// owner has it.
func (s *Server) ssFind(r *http.Request) (*scaleSet, int, any) {
	owner, ok := s.admin(r)
	if !ok {
		st, b := unauthorized()
		return nil, st, b
	}
	set, ok := s.ss.sets[int(idParam(r, "id"))]
	if !ok || !sameOwner(set.owner, owner) {
		st, b := actionsError(http.StatusNotFound, "RunnerScaleSetNotFoundException", fmt.Sprintf("Runner scale set %s not found.", r.PathValue("id")))
		return nil, st, b
	}
	return set, 0, nil
}

func (s *Server) ssList(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	owner, ok := s.admin(r)
	if !ok {
		return unauthorized()
	}
	group, _ := strconv.Atoi(query(r, "runnerGroupId"))
	name := query(r, "name")
	list := []map[string]any{}
	for _, set := range s.ss.ordered() {
		if sameOwner(set.owner, owner) && (group == 0 || set.groupID == group) && (name == "" || strings.EqualFold(set.name, name)) {
			list = append(list, s.ssJSON(set))
		}
	}
	return http.StatusOK, map[string]any{"count": len(list), "value": list}
}

func (s *Server) ssGet(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set, st, b := s.ssFind(r)
	if set == nil {
		return st, b
	}
	return http.StatusOK, s.ssJSON(set)
}

// ssBody is a scale set as the client sends it (types.go, RunnerScaleSet:
// note "RunnerSetting", capitalised, which the client always sends).
type ssBody struct {
	Name          string `json:"name"`
	RunnerGroupID int    `json:"runnerGroupId"`
	Labels        []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"labels"`
	RunnerSetting *struct {
		DisableUpdate bool `json:"disableUpdate"`
	} `json:"RunnerSetting"`
}

func (b *ssBody) labelNames() []string {
	var out []string
	for _, l := range b.Labels {
		out = append(out, l.Name)
	}
	return out
}

func (s *Server) ssCreate(w http.ResponseWriter, r *http.Request) (int, any) {
	var req ssBody
	if err := decode(r, &req); err != nil {
		return actionsError(http.StatusBadRequest, "ArgumentException", err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	owner, ok := s.admin(r)
	if !ok {
		return unauthorized()
	}
	if req.Name == "" {
		return actionsError(http.StatusBadRequest, "ArgumentException", "The runner scale set name is required.")
	}
	if req.RunnerGroupID == 0 {
		req.RunnerGroupID = 1 // the default group (the library's example passes 1 for it)
	}
	group, ok := s.groupName(owner, int64(req.RunnerGroupID))
	if !ok {
		return actionsError(http.StatusNotFound, "RunnerGroupNotFoundException", fmt.Sprintf("Runner group %d not found.", req.RunnerGroupID))
	}
	for _, set := range s.ss.sets {
		// "runner scale set names must be unique within a runner group"
		// (client.go, CreateRunnerScaleSet). The status and typeName of
		// the real refusal are not documented: the fake answers 409.
		if sameOwner(set.owner, owner) && set.groupID == req.RunnerGroupID && strings.EqualFold(set.name, req.Name) {
			return actionsError(http.StatusConflict, "RunnerScaleSetExistsException", "A runner scale set named "+req.Name+" already exists in the runner group.")
		}
	}
	labels := req.labelNames()
	if len(labels) == 0 {
		labels = []string{req.Name} // what the client does too (ensureLabels)
	}
	s.ss.nextID++
	set := &scaleSet{id: s.ss.nextID, owner: owner, name: req.Name, groupID: req.RunnerGroupID, group: group, labels: labels, created: s.now()}
	if req.RunnerSetting != nil {
		set.disableUpdate = req.RunnerSetting.DisableUpdate
	}
	s.ss.sets[set.id] = set
	return http.StatusOK, s.ssJSON(set)
}

func (s *Server) ssUpdate(w http.ResponseWriter, r *http.Request) (int, any) {
	var req ssBody
	if err := decode(r, &req); err != nil {
		return actionsError(http.StatusBadRequest, "ArgumentException", err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	set, st, b := s.ssFind(r)
	if set == nil {
		return st, b
	}
	// What the client leaves out (omitempty) stays; RunnerSetting is
	// always sent, so DisableUpdate is what it says.
	if req.Name != "" {
		set.name = req.Name
	}
	if req.RunnerGroupID != 0 {
		group, ok := s.groupName(set.owner, int64(req.RunnerGroupID))
		if !ok {
			return actionsError(http.StatusNotFound, "RunnerGroupNotFoundException", fmt.Sprintf("Runner group %d not found.", req.RunnerGroupID))
		}
		set.groupID, set.group = req.RunnerGroupID, group
	}
	if l := req.labelNames(); len(l) > 0 {
		set.labels = l
	}
	if req.RunnerSetting != nil {
		set.disableUpdate = req.RunnerSetting.DisableUpdate
	}
	return http.StatusOK, s.ssJSON(set)
}

// ssDelete removes a scale set and its session. Its runners and jobs
// stay (a job of it then waits for nobody): what the real service does
// with them is not documented.
func (s *Server) ssDelete(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set, st, b := s.ssFind(r)
	if set == nil {
		return st, b
	}
	delete(s.ss.sets, set.id)
	set.session = nil
	s.wake()
	return http.StatusNoContent, nil
}

// ssJSON is a scale set as the service answers it (types.go, RunnerScaleSet).
func (s *Server) ssJSON(set *scaleSet) map[string]any {
	labels := make([]map[string]any, len(set.labels))
	for i, l := range set.labels {
		labels[i] = map[string]any{"type": "System", "name": l}
	}
	setting := map[string]any{}
	if set.disableUpdate {
		setting["disableUpdate"] = true
	}
	return map[string]any{
		"id": set.id, "name": set.name, "runnerGroupId": set.groupID, "runnerGroupName": set.group,
		"labels": labels, "RunnerSetting": setting, "createdOn": set.created.UTC().Format(time.RFC3339Nano),
		"runnerJitConfigUrl": fmt.Sprintf("%s/%d/generatejitconfig", ssRoot, set.id),
		"statistics":         s.ssStats(set),
	}
}
