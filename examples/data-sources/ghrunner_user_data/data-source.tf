# User data for a pool's launch template: installs the agent and starts it.
data "ghrunner_user_data" "linux" {
  table        = "ghrunner-prod-state"
  region       = "eu-west-1"
  agent_url    = "https://ghrunner-prod-artifacts.s3.eu-west-1.amazonaws.com/agent/ghrunner-agent-arm64"
  agent_sha256 = "0000000000000000000000000000000000000000000000000000000000000000"

  pre_runner_script = <<-EOT
    #!/bin/bash
    apt-get install -y build-essential
  EOT
}
