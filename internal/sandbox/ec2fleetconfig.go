package sandbox

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// fleetConfigRefusal says why EC2 would refuse a CreateFleet request as a
// whole, before it launches anything ("" when it would not).
//
// Two subnets of one Availability Zone in one request: an EC2 Fleet
// request cannot span different subnets of the same AZ (EC2 User Guide,
// "EC2 Fleet limitations"); EC2 answers the call with the API error
// InvalidFleetConfig, "The fleet configuration contains duplicate instance
// pools." (as users quote it: aws-samples/aws-plugin-for-slurm #19,
// github-aws-runners/terraform-aws-github-runner #2904 and #5297). moto
// launches such a request.
func (s *Sandbox) fleetConfigRefusal(ctx context.Context, form url.Values) (code, msg string) {
	var subnets []string
	seen := map[string]bool{}
	for i := 1; ; i++ {
		key := fmt.Sprintf("LaunchTemplateConfigs.1.Overrides.%d.", i)
		if !form.Has(key+"InstanceType") && !form.Has(key+"SubnetId") {
			break
		}
		if id := form.Get(key + "SubnetId"); id != "" && !seen[id] {
			seen[id] = true
			subnets = append(subnets, id)
		}
	}
	if len(subnets) < 2 {
		return "", ""
	}
	out, err := s.AWS.EC2().DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: subnets})
	if err != nil {
		return "", "" // moto answers the request as it would
	}
	zones := map[string]string{}
	for _, sn := range out.Subnets {
		az := aws.ToString(sn.AvailabilityZone)
		if other, ok := zones[az]; ok && other != aws.ToString(sn.SubnetId) {
			return "InvalidFleetConfig", "The fleet configuration contains duplicate instance pools."
		}
		zones[az] = aws.ToString(sn.SubnetId)
	}
	return "", ""
}

// ec2Error answers as EC2's query API answers a request it refuses.
func ec2Error(w http.ResponseWriter, code, msg string) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(http.StatusBadRequest)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>sandbox-ec2-%020d</RequestID></Response>`,
		xmlEscape(code), xmlEscape(msg), faultSeq.Add(1))
}
