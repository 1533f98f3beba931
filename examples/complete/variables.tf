variable "region" {
  description = "AWS region to deploy to."
  type        = string
  default     = "eu-west-1"
}

variable "github_parameter" {
  description = "SSM SecureString parameter with the GitHub App credentials (JSON)."
  type        = string
  default     = "/ghrunner/github"
}

variable "github_owner" {
  description = "GitHub organization the runners register with."
  type        = string
}

variable "image_id" {
  description = "Linux AMI (x86_64) with bash, curl and systemd, e.g. Ubuntu 24.04."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets with egress to GitHub and AWS, in several AZs."
  type        = list(string)
}

variable "security_group_ids" {
  description = "Security groups for the runners (egress only)."
  type        = list(string)
  default     = null
}
