package sandbox

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
)

// IAM's quotas as IAM enforces them and moto does not (IAM User Guide, "IAM
// and AWS STS quotas"; sizes count characters other than white space): a
// role's trust policy holds 2,048 (the default; an account may raise it),
// a role's inline policies 10,240 together, a customer managed policy
// 6,144; role and instance profile names 64 characters. The answers are
// LimitExceeded and ValidationError, as IAM gives them; their exact texts
// are the ones users quote.
const (
	trustPolicyQuota    = 2048
	inlinePoliciesQuota = 10240
	managedPolicyQuota  = 6144
	iamNameQuota        = 64
)

// policySize is a policy's size as IAM counts it.
func policySize(doc string) int {
	n := 0
	for _, r := range doc {
		if !unicode.IsSpace(r) {
			n++
		}
	}
	return n
}

// iamQuotaRefusal says which quota an IAM request passes ("" when none).
func (s *Sandbox) iamQuotaRefusal(ctx context.Context, form url.Values) (code, msg string) {
	switch form.Get("Action") {
	case "CreateRole", "CreateInstanceProfile":
		for _, field := range []string{"RoleName", "InstanceProfileName"} {
			if n := form.Get(field); len(n) > iamNameQuota {
				return "ValidationError", fmt.Sprintf("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must have length less than or equal to %d", n, strings.ToLower(field[:1])+field[1:], iamNameQuota)
			}
		}
		if doc := form.Get("AssumeRolePolicyDocument"); policySize(doc) > trustPolicyQuota {
			return "LimitExceeded", fmt.Sprintf("Cannot exceed quota for ACLSizePerRole: %d", trustPolicyQuota)
		}
	case "UpdateAssumeRolePolicy":
		if doc := form.Get("PolicyDocument"); policySize(doc) > trustPolicyQuota {
			return "LimitExceeded", fmt.Sprintf("Cannot exceed quota for ACLSizePerRole: %d", trustPolicyQuota)
		}
	case "CreatePolicy", "CreatePolicyVersion":
		if doc := form.Get("PolicyDocument"); policySize(doc) > managedPolicyQuota {
			return "LimitExceeded", fmt.Sprintf("Cannot exceed quota for PolicySize: %d", managedPolicyQuota)
		}
	case "PutRolePolicy":
		role, name := form.Get("RoleName"), form.Get("PolicyName")
		total := policySize(form.Get("PolicyDocument")) + s.otherInlineSize(ctx, role, name)
		if total > inlinePoliciesQuota {
			return "LimitExceeded", fmt.Sprintf("Maximum policy size of %d bytes exceeded for role %s", inlinePoliciesQuota, role)
		}
	}
	return "", ""
}

// otherInlineSize is the size of role's inline policies but name.
func (s *Sandbox) otherInlineSize(ctx context.Context, role, name string) int {
	client := admin.IAM(s.AWS)
	list, err := client.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: aws.String(role)})
	if err != nil {
		return 0 // no such role: IAM answers that itself
	}
	n := 0
	for _, p := range list.PolicyNames {
		if p == name {
			continue
		}
		got, err := client.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(p)})
		if err == nil {
			doc, _ := url.QueryUnescape(aws.ToString(got.PolicyDocument))
			n += policySize(doc)
		}
	}
	return n
}

// iamError answers as IAM's query API does.
func iamError(w http.ResponseWriter, code, msg string) {
	type errBody struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	raw, _ := xml.Marshal(struct {
		XMLName   xml.Name `xml:"https://iam.amazonaws.com/doc/2010-05-08/ ErrorResponse"`
		Error     errBody  `xml:"Error"`
		RequestID string   `xml:"RequestId"`
	}{Error: errBody{"Sender", code, msg}, RequestID: fmt.Sprintf("sandbox-iam-quota-%020d", faultSeq.Add(1))})
	w.Header().Set("Content-Type", "text/xml")
	status := http.StatusBadRequest
	if code == "LimitExceeded" {
		status = http.StatusConflict
	}
	w.WriteHeader(status)
	w.Write(append([]byte(xml.Header), raw...))
}
