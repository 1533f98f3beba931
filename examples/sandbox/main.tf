# The runner-pool module pointed at the local sandbox (make sandbox): every
# AWS endpoint is the sandbox's front endpoint, the pool's agents talk to it
# too, and the timings are short so the story plays in about a minute.
terraform {
  required_version = ">= 1.5"
  required_providers {
    ghrunner = { source = "ghrunner/ghrunner" }
  }
}

variable "endpoint" {
  description = "The sandbox's front endpoint (AWS_ENDPOINT_URL)."
  type        = string
}

variable "architecture" {
  description = "This machine's architecture: the sandbox runs the functions locally."
  type        = string
}

variable "image_id" {
  description = "A Linux AMI moto knows."
  type        = string
}

variable "subnet_id" {
  description = "A moto subnet."
  type        = string
}

variable "github_parameter" {
  description = "SSM parameter with the fake GitHub App's credentials."
  type        = string
}

variable "oidc_issuer" {
  description = "The fake GitHub's Actions OIDC issuer (http on a loopback address): provision and release verify the invoking jobs' tokens against it."
  type        = string
}

variable "idle_window_cron" {
  description = "When the pool keeps idle runners; the story picks an hour that is not now, so scale-down trims the pool; the chaos suite picks every minute, so scale-down keeps two idle runners and trims the rest."
  type        = string
}

variable "token_pool_idle_window_cron" {
  description = "The token pool's idle window; empty: idle_window_cron. The story keeps two token runners idle all the time (* * * * *), so refresh pre-warms that pool before its first workflow."
  type        = string
  default     = ""
}

variable "max_runtime_seconds" {
  description = "The pools' running lease, the shortest the provider takes in the story and the chaos suite: the control loop's timings follow it (1 s heartbeats, stale agents found within 10 s, one-minute leases for new and claimed instances); the benchmarks set the default, 3600, for production's (15 s heartbeats)."
  type        = number
  default     = 60
}

variable "max_provisions_per_repository" {
  description = "Both pools' fair-share limit of provisions in flight per repository; null: none. The chaos suite sets it, and a repository of its own floods provision into it."
  type        = number
  default     = null
}

variable "scale_set" {
  description = "The name of a runner scale set the linux pool serves (at most three runners), with the listener deployed as an ECS service that the sandbox runs from the image the provider pushed; empty: none."
  type        = string
  default     = ""
}

variable "spot_pool" {
  description = "The name of a spot pool to add (max_instances 3, no idle window), whose instances the chaos suite interrupts mid-job; \"\": none."
  type        = string
  default     = ""
}

variable "stopped_pool" {
  description = "The name of a pool to add with a stopped tier (two instances stopped at most, each kept 60 s, the least the provider takes; no idle window), whose idle instances scale-down stops and the next workflow starts; \"\": none. The story plays it."
  type        = string
  default     = ""
}

variable "linux_stopped" {
  description = "A stopped tier for the linux pool; null: none. The chaos suite sets one, so that its scale-downs stop idle instances and its workflows start them."
  type = object({
    max          = number
    keep_seconds = number
  })
  default = null
}

variable "security_group_id" {
  description = "A moto security group for the listener's task (the default VPC's)."
  type        = string
  default     = null
}

variable "max_queued_per_repository" {
  description = "Both pools' fair-share limit of capacity-queue places per repository; null: none (the chaos suite sets it)."
  type        = number
  default     = null
}

provider "ghrunner" {
  region      = "us-east-1"
  environment = "sandbox"
  # A tag key as organizations write them, with a space and a "/": it
  # reaches every object, the instances included.
  default_tags = { "cost center/team" = "ci runners" }
  endpoints {
    cloudwatch = var.endpoint
    dynamodb   = var.endpoint
    ec2        = var.endpoint
    ecr        = var.endpoint
    ecs        = var.endpoint
    iam        = var.endpoint
    lambda     = var.endpoint
    logs       = var.endpoint
    s3         = var.endpoint
    scheduler  = var.endpoint
    sns        = var.endpoint
    sqs        = var.endpoint
    ssm        = var.endpoint
    sts        = var.endpoint
  }
}

locals {
  # Short, so the story plays in about a minute: max_runtime is the
  # shortest the provider accepts (the chaos suite runs jobs past it), and
  # the control loop's timings derived from it take their floors.
  timings = {
    max_runtime_seconds = var.max_runtime_seconds
    idle_ttl_seconds    = 600
  }
  pool = {
    owner          = "acme"
    image_id       = var.image_id
    instance_types = ["c7i.large", "m7i.large"]
    subnet_ids     = [var.subnet_id]
    usage_class    = "on-demand"
    max_instances  = 10
    agent_endpoint = var.endpoint
    # Follows actions/runner's latest release (the default, said here):
    # the story and the chaos suite publish a newer one on the fake
    # github.com mid-way, and the pools move to it while idle.
    runner_version = "latest"
    idle_windows   = [{ cron = var.idle_window_cron, time_zone = "UTC", idle_count = 2 }]
    timings        = local.timings
    # Fair share (null unless the chaos suite sets them).
    max_provisions_per_repository = var.max_provisions_per_repository
    max_queued_per_repository     = var.max_queued_per_repository
  }
}

module "runners" {
  source              = "../../modules/runner-pool"
  prefix              = "sandbox"
  github_parameter    = var.github_parameter
  oidc_issuer         = var.oidc_issuer
  architecture        = var.architecture
  refresh_schedule    = "rate(1 minute)"
  listener            = var.scale_set == "" ? {} : { security_group_ids = [var.security_group_id] }
  scale_down_schedule = "rate(10 minutes)"

  pools = merge({
    # A just-in-time runner per job (the default), and the scale set's
    # runners when the sandbox is asked for one.
    linux = merge(local.pool, { stopped = var.linux_stopped }, var.scale_set == "" ? {} : { scale_set = { name = var.scale_set, max_runners = 3 } })
    # Registration tokens and config.sh: the fallback for GitHub
    # Enterprise Server versions without just-in-time runners.
    linux-token = merge(local.pool, {
      registration = "token"
      idle_windows = [{ cron = coalesce(var.token_pool_idle_window_cron, var.idle_window_cron), time_zone = "UTC", idle_count = 2 }]
    })
    }, var.spot_pool == "" ? {} : {
    # Spot instances, which the chaos suite interrupts mid-job.
    (var.spot_pool) = merge(local.pool, { usage_class = "spot", max_instances = 3, idle_windows = [] })
    }, var.stopped_pool == "" ? {} : {
    # Idle instances stopped rather than terminated, started for the next
    # workflow: the story plays the tier end to end.
    (var.stopped_pool) = merge(local.pool, { max_instances = 3, idle_windows = [], stopped = { max = 2, keep_seconds = 60 } })
  })
}

output "functions" {
  value = module.runners.function_names
}

output "listener_service_arn" {
  value = module.runners.listener_service_arn
}

output "table" {
  value = module.runners.table_name
}

output "queues" {
  value = module.runners.queue_urls
}
