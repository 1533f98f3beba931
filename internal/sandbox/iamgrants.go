package sandbox

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
)

// Lambda checks, when an event source mapping or an on-failure destination
// is set, that the function's role may use it, and does not see a policy
// put on the role moments before: CreateEventSourceMapping fails with 400
// InvalidParameterValueException "Cannot access stream <arn>. Please ensure
// the role can perform the GetRecords, GetShardIterator, DescribeStream,
// and ListStreams Actions on your stream in IAM." (as users quote it), and
// PutFunctionEventInvokeConfig with "The function's execution role does not
// have permissions to call Publish on <topic>" (the same form; its exact
// text is not documented). terraform-provider-aws retries both. How long
// IAM takes is not documented either: the endpoint refuses for
// GrantPropagation after each PutRolePolicy of the function's role.

// GrantPropagation is how long after PutRolePolicy the endpoint refuses
// what Lambda checks against that role's policy, counted from the first
// such check (lag.fromFirstUse): under load terraform may take longer than
// this between the policy and the mapping, and the provider's retry would
// then go unexercised.
const GrantPropagation = 10 * time.Second

// GrantRefusals is how many requests the endpoint refused for a role policy
// Lambda did not see yet.
func (s *Sandbox) GrantRefusals() int { return s.grants.refusals() }

// usesGrant says whether r is a Lambda call that checks the function's
// role's policy: creating a stream's event source mapping, or setting an
// asynchronous invocation's on-failure destination.
func usesGrant(r *http.Request) bool {
	p := strings.TrimSuffix(r.URL.Path, "/")
	return r.Method == http.MethodPost && p == "/2015-03-31/event-source-mappings" ||
		(r.Method == http.MethodPut || r.Method == http.MethodPost) && strings.HasPrefix(p, "/2019-09-25/functions/") && strings.HasSuffix(p, "/event-invoke-config")
}

// serveGrantUser refuses r while the function's role got a policy too
// recently, as Lambda does; else passes it on.
func (s *Sandbox) serveGrantUser(w http.ResponseWriter, r *http.Request, next http.Handler) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var in struct {
		FunctionName, EventSourceArn string
		DestinationConfig            *struct{ OnFailure *struct{ Destination string } }
	}
	json.Unmarshal(body, &in)
	fn := in.FunctionName
	if fn == "" { // event-invoke-config names it in the path
		fn = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(r.URL.Path, "/"), "/2019-09-25/functions/"), "/event-invoke-config")
	}
	msg := ""
	switch {
	case in.EventSourceArn != "":
		msg = "Cannot access stream " + in.EventSourceArn + ". Please ensure the role can perform the GetRecords, GetShardIterator, DescribeStream, and ListStreams Actions on your stream in IAM."
	case in.DestinationConfig != nil && in.DestinationConfig.OnFailure != nil && in.DestinationConfig.OnFailure.Destination != "":
		msg = "The function's execution role does not have permissions to call Publish on " + in.DestinationConfig.OnFailure.Destination
	}
	if msg != "" && s.grants.pending() {
		got, err := admin.Lambda(s.AWS).GetFunction(r.Context(), &lambda.GetFunctionInput{FunctionName: aws.String(fn)})
		if err == nil && got.Configuration != nil {
			role := aws.ToString(got.Configuration.Role)
			if s.grants.refuses(role[strings.LastIndex(role, "/")+1:]) {
				raw, _ := json.Marshal(map[string]string{"Type": "User", "message": msg, "Message": msg})
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("X-Amzn-Errortype", "InvalidParameterValueException")
				w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("sandbox-grant-%020d", faultSeq.Add(1)))
				w.WriteHeader(http.StatusBadRequest)
				w.Write(raw)
				return
			}
		}
	}
	next.ServeHTTP(w, r)
}
