package provider

import (
	"strings"
	"testing"
)

// ghrunner_listener's bad input (the catalogue of badinput_test.go): plan
// refuses each, naming the attribute and the rule.
func TestAccListener_badInput(t *testing.T) {
	listener := func(attrs string) string {
		return providerConfig() + `resource "ghrunner_listener" "l" {
  table            = "ghr-state"
  github_parameter = "/ghrunner/acc/github"
  subnet_ids       = ["subnet-0123456789abcdef0"]
` + attrs + "\n}\n"
	}
	fargate := "is not a size Fargate runs with cpu"
	runBadAttrs(t, []badAttr{
		{"memory too small for cpu 256", listener("memory = 4096"), attrError("memory", "4096 MiB "+fargate+" 256; with cpu 256 use 512, 1024 or 2048")},
		{"memory off the step", listener("cpu = 1024\nmemory = 2500"), attrError("memory", "2500 MiB "+fargate+" 1024; with cpu 1024 use 2048 to 8192 in steps of 1024")},
		{"memory over the row", listener("cpu = 4096\nmemory = 31744"), attrError("memory", fargate+" 4096")},
		{"memory off the 8192 step", listener("cpu = 8192\nmemory = 17408"), attrError("memory", fargate+" 8192; with cpu 8192 use 16384 to 61440 in steps of 4096")},
		{"cpu not a Fargate size", listener("cpu = 300"), attrError("cpu", "value must be one of")},
		{"architecture", listener(`architecture = "x86_64"`), attrError("architecture", "value must be one of")},
		{"subnet id", providerConfig() + `resource "ghrunner_listener" "l" {
  table            = "ghr-state"
  github_parameter = "/ghrunner/acc/github"
  subnet_ids       = ["subnet-xyz"]
}
`, attrError("subnet_ids", "must be a subnet id such as subnet-0123456789abcdef0")},
		{"no subnets", providerConfig() + `resource "ghrunner_listener" "l" {
  table            = "ghr-state"
  github_parameter = "/ghrunner/acc/github"
  subnet_ids       = []
}
`, attrError("subnet_ids", "set must contain at least 1 elements")},
		{"security group id", listener(`security_group_ids = ["sg-1;rm"]`), attrError("security_group_ids", "must be a security group id such as sg-0123456789abcdef0")},
		{"log level", listener(`log_level = "trace"`), attrError("log_level", "value must be one of")},
		{"log retention", listener("log_retention_days = 2"), attrError("log_retention_days", "value must be one of")},
		{"image uri with a scheme", listener(`image_uri = "https://ghcr.io/x/listener:1"`), attrError("image_uri", "must be an image reference")},
		{"image uri short digest", listener(`image_uri = "ghcr.io/x/listener@sha256:abc"`), attrError("image_uri", "must be an image reference")},
		{"cluster not an ARN", listener(`cluster_arn = "ghr-prod"`), attrError("cluster_arn", "must be an ECS cluster ARN")},
		{"another environment", listener(`environment = "prod"`), attrError("environment", `"prod" must be the provider's environment "acc"`)},
		{"ecr_registry with a scheme", strings.Replace(listener(""), "  endpoints {\n", "  endpoints {\n    ecr_registry = \"https://127.0.0.1:5000\"\n", 1),
			attrError("ecr_registry", "must be a registry host such as 127.0.0.1:5000 (no scheme, no path)")},
		{"github parameter", providerConfig() + `resource "ghrunner_listener" "l" {
  table            = "ghr-state"
  github_parameter = "gh token"
  subnet_ids       = ["subnet-0123456789abcdef0"]
}
`, attrError("github_parameter", "must be an SSM parameter name")},
	})
}

func TestFargateSizes(t *testing.T) {
	for _, c := range []struct {
		cpu, memory int64
		ok          bool
	}{
		{256, 512, true}, {256, 2048, true}, {256, 1536, false}, {256, 3072, false},
		{512, 1024, true}, {512, 4096, true}, {512, 512, false},
		{1024, 8192, true}, {1024, 9216, false},
		{2048, 16384, true}, {4096, 30720, true}, {4096, 31744, false},
		{8192, 16384, true}, {8192, 20480, true}, {8192, 17408, false}, {8192, 61440, true},
		{16384, 32768, true}, {16384, 40960, true}, {16384, 36864, false}, {16384, 122880, true}, {16384, 131072, false},
		{300, 512, false},
	} {
		if got := fargateMemory(c.cpu, c.memory); got != c.ok {
			t.Errorf("cpu %d memory %d: %v, want %v", c.cpu, c.memory, got, c.ok)
		}
	}
}
