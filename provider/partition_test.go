package provider

import (
	"strings"
	"testing"
)

// Issue 30, item 12: service names in conditions and URLs follow the
// partition's DNS suffix; the China regions' is amazonaws.com.cn.
func TestPoliciesAndURLsNameServicesInTheirPartitionsDomain(t *testing.T) {
	for region, want := range map[string]string{"eu-west-1": "ssm.eu-west-1.amazonaws.com", "cn-north-1": "ssm.cn-north-1.amazonaws.com.cn",
		"us-gov-west-1": "ssm.us-gov-west-1.amazonaws.com", "us-iso-east-1": "ssm.us-iso-east-1.c2s.ic.gov"} {
		if got := viaService("ssm", region); got != want {
			t.Errorf("viaService(ssm, %s) = %s, want %s", region, got, want)
		}
	}
	doc, err := functionPolicy("provision", "arn:aws-cn:dynamodb:cn-north-1:123456789012:table/ghr", "arn:aws-cn:kms:cn-north-1:123456789012:key/k",
		nil, "/ghr/github", "ghr-provision", "prod", "/", false)
	if err != nil {
		t.Fatal(err)
	}
	// (Service principals such as ec2.amazonaws.com are left as they are:
	// what each is in aws-cn is not checked here.)
	if !strings.Contains(doc, `"ssm.cn-north-1.amazonaws.com.cn"`) || !strings.Contains(doc, `"dynamodb.cn-north-1.amazonaws.com.cn"`) || strings.Contains(doc, `cn-north-1.amazonaws.com"`) {
		t.Errorf("a China region's function policy names services outside amazonaws.com.cn: %s", doc)
	}
}
