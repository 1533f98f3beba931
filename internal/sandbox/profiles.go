package sandbox

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Instance profiles as EC2 sees them. IAM is eventually consistent with
// EC2: for several seconds after an instance profile is made (and its role
// added), IAM finds it but EC2 refuses a launch that names it — RunInstances
// with an InvalidParameterValue error, an instant CreateFleet with one such
// error per override and no instance ("Value (…) for parameter
// iamInstanceProfile.arn is invalid. Invalid IAM Instance Profile ARN";
// measured at about ten seconds by those who hit it). moto knows a profile
// at once, so the endpoint plays the delay: a pool applied a moment ago
// meets it on its first launch.

// ProfilePropagation is how long after AddRoleToInstanceProfile the
// endpoint keeps refusing launches from a template naming that profile.
const ProfilePropagation = 10 * time.Second

type profileLag struct {
	mu      sync.Mutex
	known   map[string]time.Time // instance profile name: when EC2 knows it
	refused int
}

// ProfileRefusals is how many CreateFleet requests the endpoint refused for
// an instance profile EC2 did not know yet.
func (s *Sandbox) ProfileRefusals() int {
	s.profiles.mu.Lock()
	defer s.profiles.mu.Unlock()
	return s.profiles.refused
}

// ProfileJustMade makes EC2 forget an instance profile for d, as right
// after IAM made it: what a pool applied a moment ago meets.
func (s *Sandbox) ProfileJustMade(name string, d time.Duration) {
	s.profiles.mu.Lock()
	defer s.profiles.mu.Unlock()
	s.profiles.known[name] = time.Now().Add(d)
}

// withProfileLag notes the profiles IAM adds roles to and refuses the
// CreateFleet requests whose template names one EC2 does not know yet.
func (s *Sandbox) withProfileLag(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		form, _ := url.ParseQuery(string(body))
		switch form.Get("Action") {
		case "AddRoleToInstanceProfile":
			rec := forward(next, r, body)
			if rec.Code == http.StatusOK {
				s.ProfileJustMade(form.Get("InstanceProfileName"), ProfilePropagation)
			}
			copyAnswer(w, rec)
		case "CreateFleet":
			// A DryRun is answered as moto answers it: whether EC2 checks
			// the profile in a dry run is not documented, and not guessed.
			if form.Get("DryRun") == "true" {
				next.ServeHTTP(w, r)
				return
			}
			if ref, ok := s.unknownProfile(r.Context(), form); ok {
				s.profiles.mu.Lock()
				s.profiles.refused++
				s.profiles.mu.Unlock()
				refuseFleet(w, form, ref)
				return
			}
			next.ServeHTTP(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// profileRef is how a launch template names its instance profile.
type profileRef struct{ param, value string } // "arn" or "name"

// unknownProfile reads the instance profile of a CreateFleet's launch
// template from moto, when some profile is still unknown to EC2, and says
// whether it is one.
func (s *Sandbox) unknownProfile(ctx context.Context, form url.Values) (profileRef, bool) {
	s.profiles.mu.Lock()
	pending := false
	for _, at := range s.profiles.known {
		pending = pending || time.Now().Before(at)
	}
	s.profiles.mu.Unlock()
	if !pending {
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
	s.profiles.mu.Lock()
	defer s.profiles.mu.Unlock()
	return ref, time.Now().Before(s.profiles.known[name])
}

// refuseFleet answers an instant CreateFleet as EC2 does when it does not
// know the template's instance profile: an error for each override, no
// instance.
func refuseFleet(w http.ResponseWriter, form url.Values, ref profileRef) {
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
	}{RequestID: fmt.Sprintf("sandbox-profile-%020d", faultSeq.Add(1)), FleetID: fmt.Sprintf("fleet-%017x", faultSeq.Add(1))}
	what := "ARN"
	if ref.param == "name" {
		what = "name"
	}
	msg := fmt.Sprintf("Value (%s) for parameter iamInstanceProfile.%s is invalid. Invalid IAM Instance Profile %s", ref.value, ref.param, what)
	lifecycle := "on-demand"
	if form.Get("TargetCapacitySpecification.DefaultTargetCapacityType") == "spot" {
		lifecycle = "spot"
	}
	for i := 1; form.Has(fmt.Sprintf("LaunchTemplateConfigs.1.Overrides.%d.InstanceType", i)); i++ {
		o := overrides{form.Get(fmt.Sprintf("LaunchTemplateConfigs.1.Overrides.%d.InstanceType", i)), form.Get(fmt.Sprintf("LaunchTemplateConfigs.1.Overrides.%d.SubnetId", i))}
		answer.Errors = append(answer.Errors, item{ErrorCode: "InvalidParameterValue", ErrorMessage: msg, Overrides: o, Lifecycle: lifecycle})
	}
	raw, _ := xml.Marshal(answer)
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	w.Write(append([]byte(xml.Header), raw...))
}
