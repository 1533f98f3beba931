# A complete deployment on AWS: two pools for one organization, with GitHub
# App credentials in SSM, and the role the listed repositories' workflows
# assume (through GitHub's OIDC tokens) to invoke provision and release.
# Copy these files to a directory of your own, outside the clone, with an
# S3 backend for the state (docs/getting-started.md, step 4); set the
# variables (github_owner, subnet_ids, invoker_repositories,
# security_group_ids, alarm_emails), then `terraform init && terraform
# apply`; the output repository_variables holds what each repository's
# workflows need.
terraform {
  required_version = ">= 1.5"
  required_providers {
    ghrunner = { source = "ghrunner/ghrunner", version = "~> 0.1" }
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
  # This repository's copy; outside it, the registry's:
  #   source  = "ghrunner/runner-pool/ghrunner"
  #   version = "~> 0.1"
  source           = "../../modules/runner-pool"
  prefix           = "ci"
  github_parameter = var.github_parameter

  # The workflows of these repositories may invoke provision and release.
  invoker_repositories = var.invoker_repositories
  # The account's IAM OIDC identity provider for GitHub's tokens: made
  # here when the account has none (one that exists is used as it is).
  create_oidc_provider = var.create_oidc_provider
  # The dashboard and alarms; the alarms mail these addresses.
  monitoring = { alarm_emails = var.alarm_emails }

  pools = {
    linux = {
      owner = var.github_owner
      # image_id unset: the latest Ubuntu 24.04 image for the instance
      # types' architecture, chosen when the pool is created.
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
      owner              = var.github_owner
      image_id           = var.image_id
      instance_types     = ["c7i.4xlarge", "c6i.4xlarge"]
      subnet_ids         = var.subnet_ids
      security_group_ids = var.security_group_ids
      usage_class        = "on-demand"
      max_instances      = 10
    }
  }
}

# What a repository's workflows read from its variables (Settings → Secrets
# and variables → Actions → Variables), by the names examples/workflows
# uses; none of it is secret.
output "repository_variables" {
  value = {
    GHRUNNER_REGION             = var.region
    GHRUNNER_INVOKE_ROLE_ARN    = module.runners.invoker_role_arn
    GHRUNNER_PROVISION_FUNCTION = module.runners.function_names["provision"]
    GHRUNNER_RELEASE_FUNCTION   = module.runners.function_names["release"]
  }
}

# The same as commands, to run once per repository with the GitHub CLI.
output "repository_variable_commands" {
  value = join("\n", [for k, v in {
    GHRUNNER_REGION             = var.region
    GHRUNNER_INVOKE_ROLE_ARN    = module.runners.invoker_role_arn
    GHRUNNER_PROVISION_FUNCTION = module.runners.function_names["provision"]
    GHRUNNER_RELEASE_FUNCTION   = module.runners.function_names["release"]
  } : "gh variable set ${k} --body '${v}' --repo <owner/name>"])
}

# For the operator's CLI: ghrunner --table <this> --region <region> status.
output "table_name" {
  value = module.runners.table_name
}
