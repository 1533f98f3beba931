variable "region" {
  description = "AWS region to deploy to."
  type        = string
  default     = "eu-west-1"
}

variable "github_parameter" {
  description = "SSM SecureString parameter with the GitHub App credentials (JSON: appId, privateKey)."
  type        = string
  default     = "/ghrunner/github"
}

variable "github_owner" {
  description = "GitHub organization the runners register with."
  type        = string
}

variable "invoker_repositories" {
  description = "Repositories (owner/name) whose workflows may invoke provision and release."
  type        = list(string)
}

variable "create_oidc_provider" {
  description = "Create the account's IAM OIDC identity provider for GitHub's tokens (token.actions.githubusercontent.com) when the account has none."
  type        = bool
  default     = true
}

variable "image_id" {
  description = "Linux AMI (x86_64) with bash, curl and systemd. Null: the latest Ubuntu 24.04 image."
  type        = string
  default     = null
}

variable "subnet_ids" {
  description = "Private subnets with egress to GitHub and AWS (a NAT, or VPC endpoints), in several AZs."
  type        = list(string)
}

variable "security_group_ids" {
  description = "Security groups for every pool's runners (egress only). Null: the VPC's default group, which plan warns about."
  type        = list(string)
  default     = null
}

variable "alarm_emails" {
  description = "Addresses the alarms mail when they fire and when they clear (the module makes the topic; each address confirms by mail). Empty: the alarms notify no one, and plan warns."
  type        = list(string)
  default     = []
}
