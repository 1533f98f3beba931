package fakegithub

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// ScaleSetOptions configure the scale set side of the fake.
type ScaleSetOptions struct {
	// PollWait is how long a message poll waits for a message before it
	// answers 202 with no body (default 1 s). The real service holds a
	// poll about 50 seconds; tests want it short.
	PollWait time.Duration
	// JobPickup is how long a job a scale set acquired may wait for a
	// runner of the scale set before it is requeued (JobAvailable again);
	// after MaxRequeues requeues it is cancelled. Issue 38 states the
	// rule ("a job assigned but not picked up in time is cancelled and
	// requeued, up to 3 times"); GitHub documents neither the rule nor
	// the bound, so the default, 2 minutes, is the fake's choice. It is
	// measured on the wall clock, not Options.Now.
	JobPickup time.Duration
	// SessionIdleExpiry is how long a session nobody polls lives on: a
	// listener that was killed never deletes its session, and the next
	// one is refused with 409 until it ends. The service ends such
	// sessions after a time it does not document (ARC's listener simply
	// retries the conflict until it can create its own); the default, 2
	// minutes, is the fake's choice. A poll in progress keeps it alive.
	SessionIdleExpiry time.Duration
}

// MaxRequeues is how often an acquired job nobody picked up is requeued
// before it is cancelled (issue 38; not documented by GitHub).
const MaxRequeues = 3

type scaleSet struct {
	id            int
	owner         string // organization, or organization/repository
	name          string
	groupID       int
	group         string
	labels        []string
	disableUpdate bool
	created       time.Time
	session       *ssSession
	delivered     int // messages answered to a poll (a redelivery counts again)
	acked         int // messages deleted
	// lose counts acknowledgements to lose (RedeliverMessage), lost
	// those lost so far.
	lose, lost int
}

type ssSession struct {
	id       string // a GUID, as the client's uuid.UUID reads it
	owner    string // the ownerName the listener gave
	token    string // the message queue access token
	queue    []ssMessage
	pending  []map[string]any // job messages not yet in a message
	capacity int              // X-ScaleSetMaxCapacity of the last poll
	lastID   int              // lastMessageId of the last poll
	polling  int              // polls in progress
	lastPoll time.Time        // when a poll last ended (or the session began)
}

type ssMessage struct {
	id    int
	body  string // the JSON-encoded batch
	stats map[string]any
}

type ssJob struct {
	owner    string // the job's repository owner
	acquired bool
	gen      int // counts acquisitions: a pickup timer of an older one does nothing
	requeues int
	assigned time.Time // when the scale set acquired it
}

type scaleSetState struct {
	opts    ScaleSetOptions
	nextID  int
	nextMsg int
	sets    map[int]*scaleSet
	runners map[int64]int    // runner id → its scale set
	jobs    map[int64]*ssJob // scale-set job id → its scale-set state
	// hold: no runner is handed a scale-set job (HoldScaleSetJobs).
	hold bool
}

func newScaleSetState(o ScaleSetOptions) *scaleSetState {
	if o.PollWait <= 0 {
		o.PollWait = time.Second
	}
	if o.JobPickup <= 0 {
		o.JobPickup = 2 * time.Minute
	}
	if o.SessionIdleExpiry <= 0 {
		o.SessionIdleExpiry = 2 * time.Minute
	}
	return &scaleSetState{opts: o, sets: map[int]*scaleSet{}, runners: map[int64]int{}, jobs: map[int64]*ssJob{}}
}

func (st *scaleSetState) ordered() []*scaleSet {
	out := make([]*scaleSet, 0, len(st.sets))
	for _, set := range st.sets {
		out = append(out, set)
	}
	slices.SortFunc(out, func(a, b *scaleSet) int { return a.id - b.id })
	return out
}

func newGUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Sessions. A scale set has at most one message session: while one
// lives, creating another is refused with 409 and the service's
// RunnerScaleSetSessionConflictException (the name ARC's listener logs,
// actions/actions-runner-controller issue #4285; the message text is not
// documented). The library has no error of its own for it: the caller
// sees "409 Conflict" and the typeName in the error (errors.go, the
// default case). A session lives until it is deleted or its scale set
// is; the real service also ends a session nobody polls, after a time it
// does not document, which the fake does not model. A session's
// operations on another session id are answered 400
// RunnerScaleSetSessionExpiredException, "The session identifier <id> is
// not valid." (as quoted in the same issue).
const (
	sessionConflictType = "GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionConflictException, GitHub.Actions.Runtime.WebApi"
	sessionExpiredType  = "GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionExpiredException, GitHub.Actions.Runtime.WebApi"
)

func (s *Server) ssSessionCreate(w http.ResponseWriter, r *http.Request) (int, any) {
	var req struct {
		OwnerName string `json:"ownerName"`
	}
	if err := decode(r, &req); err != nil {
		return actionsError(http.StatusBadRequest, "ArgumentException", err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	set, st, b := s.ssFind(r)
	if set == nil {
		return st, b
	}
	if old := set.session; old != nil && old.polling == 0 && time.Since(old.lastPoll) > s.ss.opts.SessionIdleExpiry {
		// Nobody polled it for SessionIdleExpiry: its listener is gone.
		set.session = nil
	}
	if set.session != nil {
		return actionsError(http.StatusConflict, sessionConflictType,
			fmt.Sprintf("The runner scale set %s already has an active session for owner %s.", set.name, set.session.owner))
	}
	set.session = &ssSession{id: newGUID(), owner: req.OwnerName, token: randomToken("mq_"), lastPoll: time.Now()}
	// A new session hears of every job still waiting for the scale set.
	for _, j := range s.ssJobsOf(set, JobQueued) {
		if !s.ss.jobs[j.ID].acquired {
			set.session.pending = append(set.session.pending, s.jobMessage("JobAvailable", j))
		}
	}
	return http.StatusOK, s.sessionJSON(r, set)
}

func (s *Server) sessionJSON(r *http.Request, set *scaleSet) map[string]any {
	return map[string]any{
		"sessionId":               set.session.id,
		"ownerName":               set.session.owner,
		"runnerScaleSet":          s.ssJSON(set),
		"messageQueueUrl":         fmt.Sprintf("http://%s/_fake/scalesets/%d/sessions/%s/messages", r.Host, set.id, set.session.id),
		"messageQueueAccessToken": set.session.token,
		"statistics":              s.ssStats(set),
	}
}

// ssSession returns the scale set and its session named by the path.
func (s *Server) ssSession(r *http.Request) (*scaleSet, int, any) {
	set, st, b := s.ssFind(r)
	if set == nil {
		return nil, st, b
	}
	if set.session == nil || set.session.id != r.PathValue("sid") {
		st, b := actionsError(http.StatusBadRequest, sessionExpiredType, "The session identifier "+r.PathValue("sid")+" is not valid.")
		return nil, st, b
	}
	return set, 0, nil
}

func (s *Server) ssSessionDelete(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set, st, b := s.ssSession(r)
	if set == nil {
		return st, b
	}
	set.session = nil
	s.wake() // a poll of it ends
	return http.StatusNoContent, nil
}

// ssSessionRefresh gives the session a new message queue token (the
// client refreshes when a poll, delete or acquire is answered 401:
// session_client.go, refreshMessageSession); its messages stay.
func (s *Server) ssSessionRefresh(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set, st, b := s.ssSession(r)
	if set == nil {
		return st, b
	}
	set.session.token = randomToken("mq_")
	return http.StatusOK, s.sessionJSON(r, set)
}

// ExpireMessageQueueToken makes the message queue token of the scale
// set's session stale, as the service's tokens expire (after a time it
// does not document): the next poll, delete or acquire is answered 401,
// and the client refreshes the session and tries again.
func (s *Server) ExpireMessageQueueToken(scaleSetID int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if set, ok := s.ss.sets[scaleSetID]; ok && set.session != nil {
		set.session.token = randomToken("mq_")
	}
}

// queueSession authenticates a message queue request: the path's scale
// set and session, and the session's token. A stale token is 401, which
// the client takes for an expired one and refreshes.
func (s *Server) queueSession(r *http.Request) (*scaleSet, int, any) {
	set, ok := s.ss.sets[int(idParam(r, "id"))]
	if !ok || set.session == nil || set.session.id != r.PathValue("sid") {
		st, b := actionsError(http.StatusNotFound, sessionExpiredType, "The session identifier "+r.PathValue("sid")+" is not valid.")
		return nil, st, b
	}
	if r.Header.Get("Authorization") != "Bearer "+set.session.token {
		st, b := unauthorized()
		return nil, st, b
	}
	return set, 0, nil
}

// ssGetMessage is the long poll: the oldest message not deleted yet
// (delivered again until it is: session_client.go, GetMessage, "Unless a
// message is deleted after being processed (using DeleteMessage), it will
// be returned again"), else a new one batching every job message since
// the last, else, after PollWait without any, 202 and no body. The
// lastMessageId and X-ScaleSetMaxCapacity the client sends are kept (the
// service's use of them is not documented; the fake withholds nothing).
func (s *Server) ssGetMessage(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	deadline := time.Now().Add(s.ss.opts.PollWait)
	if set, _, _ := s.queueSession(r); set != nil {
		sess := set.session
		sess.polling++
		defer func() {
			s.mu.Lock()
			sess.polling--
			sess.lastPoll = time.Now()
			s.mu.Unlock()
		}()
	}
	s.mu.Unlock()
	for {
		s.mu.Lock()
		set, st, b := s.queueSession(r)
		if set == nil {
			s.mu.Unlock()
			return st, b
		}
		sess := set.session
		sess.lastID, _ = strconv.Atoi(query(r, "lastMessageId"))
		if c, err := strconv.Atoi(r.Header.Get("X-ScaleSetMaxCapacity")); err == nil {
			sess.capacity = c
		}
		if len(sess.queue) == 0 && len(sess.pending) > 0 {
			body, _ := json.Marshal(sess.pending)
			s.ss.nextMsg++
			sess.queue = append(sess.queue, ssMessage{id: s.ss.nextMsg, body: string(body), stats: s.ssStats(set)})
			sess.pending = nil
		}
		if len(sess.queue) > 0 && r.Context().Err() == nil {
			m := sess.queue[0]
			set.delivered++
			s.mu.Unlock()
			return http.StatusOK, map[string]any{"messageId": m.id, "messageType": "RunnerScaleSetJobMessages", "body": m.body, "statistics": m.stats}
		}
		wake := s.jobWake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-time.After(time.Until(deadline)):
			return http.StatusAccepted, nil
		case <-r.Context().Done():
			return http.StatusAccepted, nil
		}
	}
}

// ssDeleteMessage acknowledges a message. Deleting one that is not there
// (deleted already) answers 204 too: the real service's answer is not
// documented.
func (s *Server) ssDeleteMessage(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set, st, b := s.queueSession(r)
	if set == nil {
		return st, b
	}
	id, _ := strconv.Atoi(r.PathValue("mid"))
	if i := slices.IndexFunc(set.session.queue, func(m ssMessage) bool { return m.id == id }); i >= 0 {
		if set.lose > 0 {
			// The acknowledgement is lost: the message stays and the next
			// poll gets it again (RedeliverMessage).
			set.lose--
			set.lost++
			return http.StatusNoContent, nil
		}
		set.session.queue = slices.Delete(set.session.queue, i, i+1)
		set.acked++
	}
	return http.StatusNoContent, nil
}

// RedeliverMessage makes the scale set's next acknowledgement (a
// DeleteMessage of a message still queued) lost: it is answered 204 but
// the message stays, and the next poll delivers it again. The service
// delivers a message until it is deleted (session_client.go, GetMessage:
// "Unless a message is deleted after being processed (using
// DeleteMessage), it will be returned again"), so a listener whose
// delete did not reach it, or that died between processing a message and
// deleting it, sees the message twice: the chaos run's "message delivered
// twice". False when the scale set has no session.
func (s *Server) RedeliverMessage(scaleSetID int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	set, ok := s.ss.sets[scaleSetID]
	if !ok || set.session == nil {
		return false
	}
	set.lose++
	return true
}

// ssAcquireJobs: the client posts the runner request ids of JobAvailable
// messages (listener.go, acquireAvailableJobs) with the session's message
// queue token (session_client.go, acquireJobs) and reads {count, value},
// the ids it got. A job is acquired by one scale set once: ids already
// acquired, of another scale set, or gone are left out. Each acquired
// job is assigned to the scale set: JobAssigned follows in the next
// message, and the job counts in TotalAssignedJobs.
func (s *Server) ssAcquireJobs(w http.ResponseWriter, r *http.Request) (int, any) {
	var ids []int64
	if err := decode(r, &ids); err != nil {
		return actionsError(http.StatusBadRequest, "ArgumentException", err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	set, ok := s.ss.sets[int(idParam(r, "id"))]
	if !ok || set.session == nil || r.Header.Get("Authorization") != "Bearer "+set.session.token {
		return unauthorized()
	}
	got := []int64{}
	for _, id := range ids {
		if s.acquire(set, id) {
			got = append(got, id)
		}
	}
	s.wake()
	return http.StatusOK, map[string]any{"count": len(got), "value": got}
}
