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

// Roles as Lambda sees them. A role IAM made moments ago cannot be assumed
// by Lambda yet: CreateFunction (and UpdateFunctionConfiguration) naming it
// fail with 400 InvalidParameterValueException, "The role defined for the
// function cannot be assumed by Lambda.", for a few seconds, the delay every
// Terraform provider that makes functions retries. moto accepts any role at
// once, so the endpoint plays the delay after each CreateRole it passes.

// RolePropagation is how long after CreateRole the endpoint refuses
// functions naming that role.
const RolePropagation = 6 * time.Second

type roleLag struct {
	mu      sync.Mutex
	known   map[string]time.Time // role name: when Lambda can assume it
	refused int
}

// RoleRefusals is how many function writes the endpoint refused for a role
// Lambda could not assume yet.
func (s *Sandbox) RoleRefusals() int {
	s.roles.mu.Lock()
	defer s.roles.mu.Unlock()
	return s.roles.refused
}

// withRoleLag notes the roles IAM makes and refuses the function writes that
// name one Lambda cannot assume yet.
func (s *Sandbox) withRoleLag(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		createRole := r.Method == http.MethodPost && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded")
		writesFunction := (r.Method == http.MethodPost && r.URL.Path == "/2015-03-31/functions") ||
			(r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/2015-03-31/functions/") && strings.HasSuffix(r.URL.Path, "/configuration"))
		if !createRole && !writesFunction {
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
		var fn struct{ Role string }
		json.Unmarshal(body, &fn)
		name := fn.Role[strings.LastIndex(fn.Role, "/")+1:]
		s.roles.mu.Lock()
		refuse := fn.Role != "" && time.Now().Before(s.roles.known[name])
		if refuse {
			s.roles.refused++
		}
		s.roles.mu.Unlock()
		if !refuse {
			next.ServeHTTP(w, r)
			return
		}
		raw, _ := json.Marshal(map[string]string{"Type": "User", "message": "The role defined for the function cannot be assumed by Lambda."})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-Errortype", "InvalidParameterValueException")
		w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("sandbox-role-%020d", faultSeq.Add(1)))
		w.WriteHeader(http.StatusBadRequest)
		w.Write(raw)
	})
}
