package sandbox

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// IAM is eventually consistent with the services that use what it makes,
// and moto is not, so the endpoint plays the delays:
//   - EC2 refuses a launch naming an instance profile for several seconds
//     after the profile got its role: RunInstances with an
//     InvalidParameterValue error, an instant CreateFleet with one such
//     error per override and no instance ("Value (…) for parameter
//     iamInstanceProfile.arn is invalid. Invalid IAM Instance Profile ARN";
//     measured at about ten seconds by those who hit it);
//   - Lambda and EventBridge Scheduler cannot assume a role made moments
//     ago: CreateFunction and UpdateFunctionConfiguration fail with 400
//     InvalidParameterValueException ("The role defined for the function
//     cannot be assumed by Lambda."), CreateSchedule and UpdateSchedule with
//     400 ValidationException ("The execution role you provide must allow
//     AWS EventBridge Scheduler to assume the role."): the delay every
//     Terraform provider that makes functions or schedules retries.

// ProfilePropagation is how long after AddRoleToInstanceProfile the
// endpoint refuses launches from a template naming that profile.
const ProfilePropagation = 10 * time.Second

// RolePropagation is how long after CreateRole the endpoint refuses
// functions and schedules naming that role.
const RolePropagation = 6 * time.Second

// lag is one delay's ledger: when each name becomes usable, and how many
// requests it refused meanwhile. A lag fromFirstUse starts a name's delay
// at the first request that needs it rather than at the change: stricter
// than IAM (whose clock starts at the change), so that the retry it
// exercises is exercised whatever the machine's load makes of the time
// between the change and its first use.
type lag struct {
	fromFirstUse bool

	mu      sync.Mutex
	known   map[string]time.Time
	delay   map[string]time.Duration // fromFirstUse: noted, not used yet
	refused int
}

func (l *lag) note(name string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.known == nil {
		l.known, l.delay = map[string]time.Time{}, map[string]time.Duration{}
	}
	if l.fromFirstUse {
		l.delay[name] = d
		delete(l.known, name)
		return
	}
	l.known[name] = time.Now().Add(d)
}

// pending says whether any name is not usable yet.
func (l *lag) pending() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.delay) > 0 {
		return true
	}
	for _, at := range l.known {
		if time.Now().Before(at) {
			return true
		}
	}
	return false
}

// refuses says whether name is not usable yet, and counts the refusal.
func (l *lag) refuses(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d, ok := l.delay[name]; ok {
		delete(l.delay, name)
		l.known[name] = time.Now().Add(d)
	}
	no := time.Now().Before(l.known[name])
	if no {
		l.refused++
	}
	return no
}

func (l *lag) refusals() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refused
}

// ProfileRefusals is how many CreateFleet requests the endpoint refused for
// an instance profile EC2 did not know yet.
func (s *Sandbox) ProfileRefusals() int { return s.profiles.refusals() }

// RoleRefusals is how many function and schedule writes the endpoint refused
// for a role Lambda or Scheduler could not assume yet.
func (s *Sandbox) RoleRefusals() int { return s.roles.refusals() }

// ProfileJustMade makes EC2 forget an instance profile for d, as right
// after IAM made it: what a pool applied a moment ago meets.
func (s *Sandbox) ProfileJustMade(name string, d time.Duration) { s.profiles.note(name, d) }

// withIAMLag notes the roles and instance profiles IAM makes and refuses
// the requests that name one its service does not know yet.
func (s *Sandbox) withIAMLag(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query := r.Method == http.MethodPost && r.Header.Get("X-Amz-Target") == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded")
		writesFunction := (r.Method == http.MethodPost && r.URL.Path == "/2015-03-31/functions") ||
			(r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/2015-03-31/functions/") && strings.HasSuffix(r.URL.Path, "/configuration"))
		writesSchedule := (r.Method == http.MethodPost || r.Method == http.MethodPut) && strings.HasPrefix(r.URL.Path, "/schedules/")
		if usesGrant(r) {
			s.serveGrantUser(w, r, next)
			return
		}
		if !query && !writesFunction && !writesSchedule {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		if !query {
			s.serveRoleUser(w, r, body, writesSchedule, next)
			return
		}
		form, _ := url.ParseQuery(string(body))
		noteAfter := func(l *lag, name string, d time.Duration) {
			rec := forward(next, r, body)
			if rec.Code == http.StatusOK {
				l.note(name, d)
			}
			copyAnswer(w, rec)
		}
		if code, msg := s.iamQuotaRefusal(r.Context(), form); code != "" {
			iamError(w, code, msg)
			return
		}
		switch form.Get("Action") {
		case "CreateRole":
			noteAfter(&s.roles, form.Get("RoleName"), RolePropagation)
		case "AddRoleToInstanceProfile":
			noteAfter(&s.profiles, form.Get("InstanceProfileName"), ProfilePropagation)
		case "PutRolePolicy":
			noteAfter(&s.grants, form.Get("RoleName"), GrantPropagation)
		case "CreateFleet":
			// A DryRun is answered as moto answers it: whether EC2 checks
			// the profile in a dry run is not documented, and not guessed.
			if form.Get("DryRun") != "true" {
				if code, msg := s.fleetConfigRefusal(r.Context(), form); code != "" {
					ec2Error(w, code, msg)
					return
				}
				if ref, ok := s.unknownProfile(r.Context(), form); ok {
					refuseFleet(w, form, ref)
					return
				}
				if code, msg := s.launchRefusal(r.Context(), form); code != "" {
					refuseOverrides(w, form, code, msg)
					return
				}
			}
			next.ServeHTTP(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// serveRoleUser refuses a function or schedule write naming a role its
// service cannot assume yet, in that service's REST-JSON error form.
func (s *Sandbox) serveRoleUser(w http.ResponseWriter, r *http.Request, body []byte, schedule bool, next http.Handler) {
	var in struct {
		Role   string                   // a function's
		Target struct{ RoleArn string } // a schedule's
	}
	json.Unmarshal(body, &in)
	role := in.Role + in.Target.RoleArn
	if role == "" || !s.roles.refuses(role[strings.LastIndex(role, "/")+1:]) {
		next.ServeHTTP(w, r)
		return
	}
	code, msg := "InvalidParameterValueException", "The role defined for the function cannot be assumed by Lambda."
	if schedule {
		code, msg = "ValidationException", "The execution role you provide must allow AWS EventBridge Scheduler to assume the role."
	}
	raw, _ := json.Marshal(map[string]string{"Type": "User", "message": msg, "Message": msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", code)
	w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("sandbox-role-%020d", faultSeq.Add(1)))
	w.WriteHeader(http.StatusBadRequest)
	w.Write(raw)
}

// profileRef is how a launch template names its instance profile.
type profileRef struct{ param, value string } // "arn" or "name"

// unknownProfile reads the instance profile of a CreateFleet's launch
// template from moto, when some profile is still unknown to EC2, and says
// whether it is one (a refusal, counted).
func (s *Sandbox) unknownProfile(ctx context.Context, form url.Values) (profileRef, bool) {
	if !s.profiles.pending() {
		return profileRef{}, false
	}
	ltv, err := s.fleetTemplate(ctx, form)
	if err != nil || ltv.LaunchTemplateData == nil || ltv.LaunchTemplateData.IamInstanceProfile == nil {
		return profileRef{}, false // moto answers the request as it would
	}
	p := ltv.LaunchTemplateData.IamInstanceProfile
	ref, name := profileRef{"name", aws.ToString(p.Name)}, aws.ToString(p.Name)
	if arn := aws.ToString(p.Arn); arn != "" {
		ref, name = profileRef{"arn", arn}, arn[strings.LastIndex(arn, "/")+1:]
	}
	return ref, s.profiles.refuses(name)
}

// refuseFleet answers an instant CreateFleet as EC2 does when it does not
// know the template's instance profile: an error for each override, no
// instance.
func refuseFleet(w http.ResponseWriter, form url.Values, ref profileRef) {
	what := "ARN"
	if ref.param == "name" {
		what = "name"
	}
	refuseOverrides(w, form, "InvalidParameterValue",
		fmt.Sprintf("Value (%s) for parameter iamInstanceProfile.%s is invalid. Invalid IAM Instance Profile %s", ref.value, ref.param, what))
}

// refuseOverrides answers an instant CreateFleet with one error for each
// override and no instance: how EC2 refuses a launch it cannot make from
// the template (CreateFleet's errorSet, CreateFleetError in the SDK model).
func refuseOverrides(w http.ResponseWriter, form url.Values, code, msg string) {
	type overrides struct {
		InstanceType string `xml:"instanceType"`
		SubnetID     string `xml:"subnetId"`
	}
	type item struct {
		ErrorCode    string    `xml:"errorCode"`
		ErrorMessage string    `xml:"errorMessage"`
		Overrides    overrides `xml:"launchTemplateAndOverrides>overrides"`
		Lifecycle    string    `xml:"lifecycle"`
	}
	answer := struct {
		XMLName   xml.Name `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ CreateFleetResponse"`
		RequestID string   `xml:"requestId"`
		FleetID   string   `xml:"fleetId"`
		Errors    []item   `xml:"errorSet>item"`
	}{RequestID: fmt.Sprintf("sandbox-fleet-%020d", faultSeq.Add(1)), FleetID: fmt.Sprintf("fleet-%017x", faultSeq.Add(1))}
	lifecycle := "on-demand"
	if form.Get("TargetCapacitySpecification.DefaultTargetCapacityType") == "spot" {
		lifecycle = "spot"
	}
	for i := 1; form.Has(fmt.Sprintf("LaunchTemplateConfigs.1.Overrides.%d.InstanceType", i)); i++ {
		o := overrides{form.Get(fmt.Sprintf("LaunchTemplateConfigs.1.Overrides.%d.InstanceType", i)), form.Get(fmt.Sprintf("LaunchTemplateConfigs.1.Overrides.%d.SubnetId", i))}
		answer.Errors = append(answer.Errors, item{ErrorCode: code, ErrorMessage: msg, Overrides: o, Lifecycle: lifecycle})
	}
	raw, _ := xml.Marshal(answer)
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	w.Write(append([]byte(xml.Header), raw...))
}
