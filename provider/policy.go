package provider

import (
	"encoding/json"
	"fmt"
	"strings"
)

// IAM policy documents the provider attaches. They are plain data built by
// these functions so unit tests can assert every statement: moto does not
// enforce IAM conditions (DESIGN.md §8).

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

// agentPolicy is the instance role's only policy: the agent reads and updates
// instance records (keys i-…, never pool, run or token items), terminates only
// instances of its own pool and environment, and downloads only the agent.
func agentPolicy(tableARN, environment, pool, agentBucket string) (string, error) {
	a, err := parseARN(tableARN)
	if err != nil {
		return "", fmt.Errorf("table arn: %w", err)
	}
	st := []policyStatement{
		{
			Sid: "OwnInstanceRecords", Effect: "Allow",
			Action:    []string{"dynamodb:GetItem", "dynamodb:UpdateItem"},
			Resource:  []string{tableARN},
			Condition: map[string]map[string]any{"ForAllValues:StringLike": {"dynamodb:LeadingKeys": []string{"i-*"}}},
		},
		{
			Sid: "TerminatePoolInstances", Effect: "Allow",
			Action:   []string{"ec2:TerminateInstances"},
			Resource: []string{fmt.Sprintf("arn:%s:ec2:%s:%s:instance/*", a.partition, a.region, a.account)},
			Condition: map[string]map[string]any{"StringEquals": {
				"aws:ResourceTag/ghr:environment": environment,
				"aws:ResourceTag/ghr:pool":        pool,
			}},
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
