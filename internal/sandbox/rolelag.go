package sandbox

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Roles as Lambda and EventBridge Scheduler see them. A role IAM made
// moments ago cannot be assumed by them yet: CreateFunction (and
// UpdateFunctionConfiguration) naming it fail with 400
// InvalidParameterValueException, "The role defined for the function cannot
// be assumed by Lambda.", CreateSchedule and UpdateSchedule with 400
// ValidationException ("The execution role you provide must allow AWS
// EventBridge Scheduler to assume the role."), for a few seconds: the delay
// every Terraform provider that makes functions or schedules retries. moto
// accepts any role at once, so the endpoint plays the delay after each
// CreateRole it passes.

// RolePropagation is how long after CreateRole the endpoint refuses
// functions and schedules naming that role.
const RolePropagation = 6 * time.Second

type roleLag struct {
	mu      sync.Mutex
	known   map[string]time.Time // role name: when Lambda can assume it
	refused int
}

// RoleRefusals is how many function and schedule writes the endpoint refused
// for a role Lambda or Scheduler could not assume yet.
func (s *Sandbox) RoleRefusals() int {
	s.roles.mu.Lock()
	defer s.roles.mu.Unlock()
	return s.roles.refused
}

// withRoleLag notes the roles IAM makes and refuses the function and
// schedule writes that name one not assumable yet.
func (s *Sandbox) withRoleLag(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		createRole := r.Method == http.MethodPost && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded")
		writesFunction := (r.Method == http.MethodPost && r.URL.Path == "/2015-03-31/functions") ||
			(r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/2015-03-31/functions/") && strings.HasSuffix(r.URL.Path, "/configuration"))
		writesSchedule := (r.Method == http.MethodPost || r.Method == http.MethodPut) && strings.HasPrefix(r.URL.Path, "/schedules/")
		if !createRole && !writesFunction && !writesSchedule {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		if createRole {
			form, _ := url.ParseQuery(string(body))
			if form.Get("Action") != "CreateRole" {
				next.ServeHTTP(w, r)
				return
			}
			rec := forward(next, r, body)
			if rec.Code == http.StatusOK {
				s.roles.mu.Lock()
				s.roles.known[form.Get("RoleName")] = time.Now().Add(RolePropagation)
				s.roles.mu.Unlock()
			}
			copyAnswer(w, rec)
			return
		}
		var fn struct {
			Role   string
			Target struct{ RoleArn string }
		}
		json.Unmarshal(body, &fn)
		role := fn.Role + fn.Target.RoleArn
		name := role[strings.LastIndex(role, "/")+1:]
		s.roles.mu.Lock()
		refuse := role != "" && time.Now().Before(s.roles.known[name])
		if refuse {
			s.roles.refused++
		}
		s.roles.mu.Unlock()
		if !refuse {
			next.ServeHTTP(w, r)
			return
		}
		code, msg := "InvalidParameterValueException", "The role defined for the function cannot be assumed by Lambda."
		if writesSchedule {
			code, msg = "ValidationException", "The execution role you provide must allow AWS EventBridge Scheduler to assume the role."
		}
		raw, _ := json.Marshal(map[string]string{"Type": "User", "message": msg, "Message": msg})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-Errortype", code)
		w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("sandbox-role-%020d", faultSeq.Add(1)))
		w.WriteHeader(http.StatusBadRequest)
		w.Write(raw)
	})
}
