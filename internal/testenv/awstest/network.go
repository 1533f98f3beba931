package awstest

import (
	"context"
	"errors"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
)

// Network is what moto offers every account to launch into.
type Network struct {
	AMI           string // a Linux x86_64 AMI with a root device
	Subnet        string // a default subnet
	SecurityGroup string // the default VPC's default security group
}

var amiRE = regexp.MustCompile(`^ami-[0-9a-f]{8,17}$`)

// Network looks up a Linux AMI (moto's first AMI is Windows), a default
// subnet and the default security group.
func (e *Moto) Network(t testing.TB) Network {
	t.Helper()
	n, err := e.NetworkContext(context.Background())
	if err != nil {
		t.Fatalf("moto network: %v", err)
	}
	return n
}

// NetworkContext is Network for callers outside tests. It is looked up
// once per moto: moto's DescribeImages reads and answers every one of its
// hundreds of default images, about 0.1 s of moto's CPU with this filter
// and 0.8 s without.
func (e *Moto) NetworkContext(ctx context.Context) (Network, error) {
	e.networkMu.Lock()
	defer e.networkMu.Unlock()
	if e.network != nil {
		return *e.network, nil
	}
	n, err := e.lookUpNetwork(ctx)
	if err == nil {
		e.network = &n
	}
	return n, err
}

func (e *Moto) lookUpNetwork(ctx context.Context) (Network, error) {
	var n Network
	cfg, err := awsconf.Load(ctx, e.Options())
	if err != nil {
		return n, err
	}
	c := cfg.EC2()
	images, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{"x86_64"}}}})
	if err != nil {
		return n, err
	}
	for _, img := range images.Images {
		if img.Platform == "" && aws.ToString(img.RootDeviceName) != "" && amiRE.MatchString(aws.ToString(img.ImageId)) {
			n.AMI = aws.ToString(img.ImageId)
			break
		}
	}
	if n.AMI == "" {
		return n, errors.New("moto offers no Linux x86_64 AMI")
	}
	subnets, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("default-for-az"), Values: []string{"true"}}}})
	if err != nil || len(subnets.Subnets) == 0 {
		return n, errors.Join(errors.New("no default subnet"), err)
	}
	groups, err := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupNames: []string{"default"}})
	if err != nil || len(groups.SecurityGroups) == 0 {
		return n, errors.Join(errors.New("no default security group"), err)
	}
	n.Subnet, n.SecurityGroup = aws.ToString(subnets.Subnets[0].SubnetId), aws.ToString(groups.SecurityGroups[0].GroupId)
	return n, nil
}
