package provider

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// The invoker role's two documents, and reading them back: its trust lets
// GitHub Actions' OIDC tokens of the listed repositories, and nothing else,
// assume it; its policy lets it invoke the listed functions, and nothing
// else. Read reconstructs repositories and function_arns from them, so an
// imported role, or one changed outside Terraform, shows what it allows.

// githubIssuer is github.com's Actions token issuer (GitHub Enterprise
// Server's is <host>/_services/token).
const githubIssuer = "token.actions.githubusercontent.com"

// invokerTrustPolicy lets the OIDC provider of issuer federate a workflow
// of one of repos (each owner/name) into the role, for tokens whose
// audience is STS. The subject of a workflow token begins repo:<owner>/<name>:
// (then the environment, ref or pull_request), so repo:<owner>/<name>:* admits
// every workflow of that repository and no other. Forked pull requests get
// no token.
func invokerTrustPolicy(partition, account, issuer string, repos []string) string {
	subs := make([]string, len(repos))
	for i, r := range sortedCopy(repos) {
		subs[i] = "repo:" + r + ":*"
	}
	return policyDocument{Version: "2012-10-17", Statement: []policyStatement{{
		Effect:    "Allow",
		Principal: map[string]string{"Federated": oidcProviderARN(partition, account, issuer)},
		Action:    []string{"sts:AssumeRoleWithWebIdentity"},
		Condition: map[string]map[string]any{
			"StringEquals": {issuer + ":aud": "sts.amazonaws.com"},
			"StringLike":   {issuer + ":sub": subs},
		},
	}}}.String()
}

// invokerPolicy lets the role invoke functions, each by its ARN.
func invokerPolicy(functions []string) string {
	return policyDocument{Version: "2012-10-17", Statement: []policyStatement{{
		Sid: "InvokeProvisionAndRelease", Effect: "Allow", Action: []string{"lambda:InvokeFunction"}, Resource: sortedCopy(functions),
	}}}.String()
}

func oidcProviderARN(partition, account, issuer string) string {
	return fmt.Sprintf("arn:%s:iam::%s:oidc-provider/%s", partition, account, issuer)
}

// invokerGrants reads repositories, functions and the trusted OIDC
// provider back from the role's trust and policy (URL-encoded, as IAM
// returns them); ok is false when either is not in the shape the provider
// writes.
func invokerGrants(trust, policy, issuer string) (repos, functions []string, provider string, ok bool) {
	var t struct {
		Statement []struct {
			Principal struct{ Federated string }
			Condition map[string]map[string]json.RawMessage
		}
	}
	var p struct {
		Statement []struct {
			Resource json.RawMessage
		}
	}
	if decode(trust, &t) != nil || decode(policy, &p) != nil || len(t.Statement) != 1 || len(p.Statement) != 1 {
		return nil, nil, "", false
	}
	for _, sub := range stringOrList(t.Statement[0].Condition["StringLike"][issuer+":sub"]) {
		r, found := strings.CutPrefix(sub, "repo:")
		r, tail := strings.CutSuffix(r, ":*")
		if !found || !tail {
			return nil, nil, "", false
		}
		repos = append(repos, r)
	}
	return repos, stringOrList(p.Statement[0].Resource), t.Statement[0].Principal.Federated, true
}

// decode reads an IAM document, URL-encoded or not.
func decode(doc string, v any) error {
	if plain, err := url.QueryUnescape(doc); err == nil {
		doc = plain
	}
	return json.Unmarshal([]byte(doc), v)
}

// stringOrList reads a policy value that is one string or a list of them.
func stringOrList(raw json.RawMessage) []string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}
	}
	var many []string
	_ = json.Unmarshal(raw, &many)
	return many
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
