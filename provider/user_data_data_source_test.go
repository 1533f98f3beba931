package provider

import (
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

func TestAccUserData(t *testing.T) {
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config: providerConfig() + `
data "ghrunner_user_data" "linux" {
  table             = "ghrunner-prod-state"
  agent_path        = "/usr/local/bin/ghrunner-agent"
  pre_runner_script = <<-EOT
    #!/bin/bash
    echo "it's $(whoami)"
    EOF
  EOT
}`,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestMatchResourceAttr("data.ghrunner_user_data.linux", "rendered", regexp.MustCompile(`systemctl enable --now ghrunner-agent.service`)),
					resource.TestCheckResourceAttrWith("data.ghrunner_user_data.linux", "rendered", func(v string) error {
						if strings.Contains(v, "whoami") {
							return errAttr("the pre-runner script appears in clear: it must travel as base64")
						}
						return nil
					}),
					resource.TestMatchResourceAttr("data.ghrunner_user_data.linux", "size", regexp.MustCompile(`^[0-9]{4}$`)),
				),
			},
			{
				Config: providerConfig() + `
data "ghrunner_user_data" "bad" {
  table     = "ghrunner-prod-state"
  agent_url = "https://bucket.s3.amazonaws.com/agent"
}`,
				ExpectError: regexp.MustCompile(`agent_sha256`),
			},
		},
	})
}

type errAttr string

func (e errAttr) Error() string { return string(e) }
