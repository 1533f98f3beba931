package awsconf

import (
	"context"
	"strings"
	"testing"
)

func TestValidateNamesTheField(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{"bad base endpoint", Options{Endpoint: "localhost:4566"}, "endpoint:"},
		{"unknown service", Options{Endpoints: map[string]string{"dynamo": "http://x"}}, "endpoints.dynamo: unknown service"},
		{"bad service endpoint", Options{Endpoints: map[string]string{"sqs": "ftp://x"}}, "endpoints.sqs:"},
		{"negative attempts", Options{MaxAttempts: -1}, "max_attempts"},
		{"half credentials", Options{AccessKeyID: "a"}, "secret_access_key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.opts.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, c.want)
			}
			if _, err := Load(context.Background(), c.opts); err == nil {
				t.Fatalf("Load accepted invalid options")
			}
		})
	}
}

func TestPerServiceEndpoint(t *testing.T) {
	cfg, err := Load(context.Background(), Options{
		Region:          "eu-west-1",
		Endpoint:        "http://127.0.0.1:1",
		Endpoints:       map[string]string{"sqs": "http://127.0.0.1:2"},
		AccessKeyID:     "a",
		SecretAccessKey: "b",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := *cfg.Endpoint("sqs"); got != "http://127.0.0.1:2" {
		t.Errorf("sqs endpoint = %s", got)
	}
	if got := *cfg.Endpoint("ec2"); got != "http://127.0.0.1:1" {
		t.Errorf("ec2 endpoint = %s, want the base endpoint", got)
	}
	if got := *cfg.SQS().Options().BaseEndpoint; got != "http://127.0.0.1:2" {
		t.Errorf("SQS client endpoint = %s", got)
	}
	if got := cfg.AWS.Retryer().MaxAttempts(); got != 5 {
		t.Errorf("default max attempts = %d, want 5", got)
	}
	if cfg.AWS.Region != "eu-west-1" {
		t.Errorf("region = %s", cfg.AWS.Region)
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv("AWS_REGION", "ap-south-1")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8")
	o := FromEnv()
	if o.Region != "ap-south-1" || o.Endpoint != "http://127.0.0.1:9" || o.Endpoints["dynamodb"] != "http://127.0.0.1:8" {
		t.Fatalf("FromEnv() = %+v", o)
	}
}
