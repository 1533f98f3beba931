package provider

import (
	"encoding/json"
	"fmt"
	"strings"
)

// IAM policy documents the provider attaches. They are plain data built by
// these functions so unit tests can assert every statement: moto does not
// enforce IAM conditions (docs/design.md).

type policyDocument struct {
	Version   string            `json:"Version"`
	Statement []policyStatement `json:"Statement"`
}

type policyStatement struct {
	Sid       string                    `json:"Sid,omitempty"`
	Effect    string                    `json:"Effect"`
	Principal map[string]string         `json:"Principal,omitempty"`
	Action    []string                  `json:"Action"`
	Resource  []string                  `json:"Resource,omitempty"`
	Condition map[string]map[string]any `json:"Condition,omitempty"`
}

func (d policyDocument) String() string {
	b, err := json.Marshal(d)
	if err != nil {
		panic(err) // only strings and maps of strings
	}
	return string(b)
}

// trustPolicy lets one AWS service assume a role.
func trustPolicy(service string) string {
	return policyDocument{Version: "2012-10-17", Statement: []policyStatement{{
		Effect: "Allow", Principal: map[string]string{"Service": service}, Action: []string{"sts:AssumeRole"},
	}}}.String()
}

// arnParts splits an ARN into partition, region and account.
type arnParts struct{ partition, region, account string }

func parseARN(arn string) (arnParts, error) {
	f := strings.SplitN(arn, ":", 6)
	if len(f) != 6 || f[0] != "arn" || f[1] == "" || f[4] == "" {
		return arnParts{}, fmt.Errorf("%q is not an ARN (arn:partition:service:region:account:resource)", arn)
	}
	return arnParts{partition: f[1], region: f[3], account: f[4]}, nil
}

// agentPolicy is the instance role's only policy. Every statement is an
// Allow: anything not listed is denied.
//   - the agent reads and updates instance records (keys i-…), never pool,
//     run or token items, and never puts, deletes, queries or scans. IAM
//     cannot narrow this to the caller's own item while the key is the bare
//     instance id: the policy variables an instance-profile session carries
//     (${aws:userid} = ROLEID:i-…, ${ec2:SourceInstanceARN}) never equal
//     it, and LeadingKeys patterns cannot cut a prefix off a variable. The
//     store's conditional writes bound to the assignment compensate
//     (docs/security.md);
//   - it terminates only itself: the calling instance's ARN must be the
//     target's (the target's id as a policy variable; a bare
//     ${ec2:SourceInstanceARN} in Resource is not in ARN format, which IAM
//     refuses), and the target must carry this environment's and pool's tags;
//   - it downloads only the agent.
func agentPolicy(tableARN, environment, pool, agentBucket string) (string, error) {
	a, err := parseARN(tableARN)
	if err != nil {
		return "", fmt.Errorf("table arn: %w", err)
	}
	instances := fmt.Sprintf("arn:%s:ec2:%s:%s:instance/", a.partition, a.region, a.account)
	st := []policyStatement{
		{
			Sid: "OwnInstanceRecords", Effect: "Allow",
			Action:    []string{"dynamodb:GetItem", "dynamodb:UpdateItem"},
			Resource:  []string{tableARN},
			Condition: map[string]map[string]any{"ForAllValues:StringLike": {"dynamodb:LeadingKeys": []string{"i-*"}}},
		},
		{
			Sid: "TerminateItself", Effect: "Allow",
			Action:   []string{"ec2:TerminateInstances"},
			Resource: []string{instances + "*"},
			Condition: map[string]map[string]any{
				"ArnEquals": {"ec2:SourceInstanceARN": instances + "${ec2:InstanceID}"},
				"StringEquals": {
					"aws:ResourceTag/ghr:environment": environment,
					"aws:ResourceTag/ghr:pool":        pool,
				},
			},
		},
	}
	if agentBucket != "" {
		st = append(st, policyStatement{
			Sid: "DownloadAgent", Effect: "Allow",
			Action:   []string{"s3:GetObject"},
			Resource: []string{fmt.Sprintf("arn:%s:s3:::%s/agent/*", a.partition, agentBucket)},
		})
	}
	return policyDocument{Version: "2012-10-17", Statement: st}.String(), nil
}
