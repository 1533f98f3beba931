# A complete deployment on AWS: two pools for one organization, with GitHub
# App credentials in SSM. Fill in the AMI, subnets and the parameter name,
# then `terraform init && terraform apply`.
terraform {
  required_version = ">= 1.5"
  required_providers {
    ghrunner = { source = "ghrunner/ghrunner" }
  }
}

provider "ghrunner" {
  region      = var.region
  environment = "ci"
  default_tags = {
    team = "platform"
  }
}

module "runners" {
  source           = "../../modules/runner-pool"
  prefix           = "ci"
  github_parameter = var.github_parameter

  pools = {
    linux = {
      owner              = var.github_owner
      image_id           = var.image_id
      instance_types     = ["c7i.large", "c6i.large", "m7i.large"]
      subnet_ids         = var.subnet_ids
      security_group_ids = var.security_group_ids
      max_instances      = 30
      # Keep three warm runners during office hours, none at night.
      idle_windows      = [{ cron = "* 7-19 * * 1-5", time_zone = "Europe/Berlin", idle_count = 3 }]
      pre_runner_script = <<-EOT
        #!/bin/bash
        set -euo pipefail
        apt-get update -q && apt-get install -qy build-essential
      EOT
    }
    linux-large = {
      owner          = var.github_owner
      image_id       = var.image_id
      instance_types = ["c7i.4xlarge", "c6i.4xlarge"]
      subnet_ids     = var.subnet_ids
      usage_class    = "on-demand"
      max_instances  = 10
    }
  }
}

output "provision_function" {
  value = module.runners.function_names["provision"]
}

output "release_function" {
  value = module.runners.function_names["release"]
}
