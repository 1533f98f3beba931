package provider

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/templates"
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
				// A stock image: the pinned release for the architecture,
				// and the record key's role id.
				Config: providerConfig() + `
data "ghrunner_user_data" "stock" {
  table            = "ghrunner-prod-state"
  agent_path       = "/usr/local/bin/ghrunner-agent"
  instance_role_id = "AROAEXAMPLEPOOLROLE01"
  runner_version   = "2.336.0"
  architecture     = "arm64"
}`,
				Check: resource.TestCheckResourceAttrWith("data.ghrunner_user_data.stock", "rendered", func(v string) error {
					u, err := templates.Parse([]byte(v))
					if err != nil {
						return err
					}
					url, sum, _ := runnerrelease.Tarball("2.336.0", "arm64")
					if u.Agent.RunnerTarballURL != url || u.Agent.RunnerTarballSHA256 != sum || u.Agent.RoleID != "AROAEXAMPLEPOOLROLE01" {
						return fmt.Errorf("agent config %+v: want the arm64 2.336.0 release and the role id", u.Agent)
					}
					return nil
				}),
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
