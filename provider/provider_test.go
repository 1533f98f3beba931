package provider

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

var env *awstest.Moto

// TestMain runs the acceptance tests for real: moto for AWS and a local
// terraform binary. A missing terraform fails with how to get one.
func TestMain(m *testing.M) {
	tf, err := exec.LookPath("terraform")
	if err != nil {
		fmt.Fprintln(os.Stderr, "terraform not found on PATH: install it, or build one with `go install github.com/hashicorp/terraform@v1.5.7`")
		os.Exit(1)
	}
	os.Setenv("TF_ACC", "1")
	os.Setenv("TF_ACC_TERRAFORM_PATH", tf)
	os.Setenv("CHECKPOINT_DISABLE", "1")
	os.Setenv("AWS_ACCESS_KEY_ID", "testing")
	os.Setenv("AWS_SECRET_ACCESS_KEY", "testing")
	// moto's listings are consistent at once: a pool's destroy need not
	// wait out EC2's index lag here.
	sweepSettle, sweepEvery = 500*time.Millisecond, 100*time.Millisecond
	os.Exit(awstest.Main(m, &env))
}

var factories = map[string]func() (tfprotov6.ProviderServer, error){
	"ghrunner": providerserver.NewProtocol6WithError(New("test")()),
}

// providerConfig points the provider at moto.
func providerConfig() string {
	return fmt.Sprintf(`
provider "ghrunner" {
  region      = "us-east-1"
  environment = "acc"
  default_tags = { team = "ci" }
  endpoints {
    cloudwatch = %[1]q
    dynamodb  = %[1]q
    ec2       = %[1]q
    ecr       = %[1]q
    ecs       = %[1]q
    iam       = %[1]q
    lambda    = %[1]q
    logs      = %[1]q
    s3        = %[1]q
    scheduler = %[1]q
    sns       = %[1]q
    sqs       = %[1]q
    ssm       = %[1]q
    sts       = %[1]q
  }
}
`, env.URL)
}
