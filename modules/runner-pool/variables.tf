variable "prefix" {
  description = "Prefix of every name the module creates: the table, the queues (<prefix>-<pool>), the functions (<prefix>-provision …) and the schedules."
  type        = string
  default     = "ghrunner"

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{0,30}$", var.prefix))
    error_message = "prefix must be 1-31 lowercase letters, digits and '-', starting with a letter or digit."
  }
}

variable "github_parameter" {
  description = "Name of the SSM SecureString parameter holding the GitHub credentials as JSON: {\"appId\":…,\"privateKey\":…} for a GitHub App or {\"token\":…}, plus \"baseUrl\" for GitHub Enterprise Server. Only the name is passed to the functions."
  type        = string

  validation {
    condition     = can(regex("^/?[A-Za-z0-9_./-]+$", var.github_parameter))
    error_message = "github_parameter must be an SSM parameter name such as /ghrunner/github."
  }
}

variable "pools" {
  description = <<-EOT
    The pools, keyed by pool name (the `pool` of provision payloads). Each needs owner (GitHub org or org/repo), instance_types and
    subnet_ids; image_id (a Linux AMI; default: the latest of image_family, ubuntu-24.04 or al2023, at create) and the rest are optional — see the ghrunner_pool resource for meanings and defaults.
  EOT
  type = map(object({
    owner              = string
    image_id           = optional(string)
    image_family       = optional(string, "ubuntu-24.04")
    instance_types     = list(string)
    subnet_ids         = list(string)
    security_group_ids = optional(list(string))
    usage_class        = optional(string, "spot")
    on_demand_fallback = optional(bool, true)
    max_instances      = optional(number, 20)
    # Fair share between the repositories allowed to invoke: most
    # provisions in flight, and most places in the pool's capacity queue,
    # per repository (null: no limit).
    max_provisions_per_repository = optional(number)
    max_queued_per_repository     = optional(number)

    root_volume_size = optional(number, 30)
    # gp3 (default), gp2, io1 or io2; IOPS (required for io1 and io2) and a
    # gp3 volume's throughput in MiB/s: ghrunner_pool checks them at plan.
    root_volume_type       = optional(string, "gp3")
    root_volume_iops       = optional(number)
    root_volume_throughput = optional(number)
    # A customer managed KMS key for the root volumes (set it when the
    # account's default EBS key is one): provision and refresh get its grants.
    root_volume_kms_key_arn = optional(string)
    agent_path              = optional(string)
    agent_endpoint          = optional(string)
    agent_endpoints         = optional(map(string))
    pre_runner_script       = optional(string)
    cleanup_script          = optional(string)
    runner_group            = optional(string)
    keep_docker_images      = optional(bool, false)
    registration            = optional(string, "jit")
    # The runner release: null or "latest" (the provider's default) follows
    # actions/runner's latest release, idle instances moving to it between
    # assignments; "x.y.z" pins one the provider pins, or any with a
    # tarball of your own and its checksum (a mirror).
    runner_version        = optional(string)
    runner_tarball_url    = optional(string)
    runner_tarball_sha256 = optional(string)
    # An HTTP(S) proxy for the instances' outbound traffic (user data,
    # agent, runner and jobs): url = "http://host:port", no credentials;
    # no_proxy adds hosts reached directly (IMDS, loopback and the agent
    # endpoints always are). ghrunner_pool checks it at plan.
    proxy = optional(object({
      url      = string
      no_proxy = optional(list(string))
    }))
    # A stopped tier between warm and retired: idle on-demand instances
    # scale-down would retire are stopped (their EBS kept) while fewer than
    # max are, and started before a new one is launched; terminated after
    # keep_seconds. ghrunner_pool refuses it for spot without on-demand.
    stopped = optional(object({
      max          = number
      keep_seconds = number
    }))
    idle_windows = optional(list(object({
      cron              = string
      time_zone         = optional(string, "UTC")
      idle_count        = number
      eviction_strategy = optional(string, "oldest_first")
    })), [])
    # A runner scale set the pool serves too: workflows name it in
    # runs-on (case-insensitively) with no provision or release job. Its
    # runners are just-in-time runners (registration "jit"); max_runners
    # (1 to max_instances; null: max_instances) bounds the instances it
    # holds. Null: none.
    scale_set = optional(object({
      name        = string
      max_runners = optional(number)
    }))
    # How long instances live and serve (ghrunner_pool's timings); the
    # control loop's own timings (heartbeat, leases of new and claimed
    # instances, boot time ...) are derived from them. Null: the default.
    timings = optional(object({
      max_runtime_seconds = optional(number)
      runtime_cap_seconds = optional(number)
      idle_ttl_seconds    = optional(number)
      max_age_seconds     = optional(number)
      max_uses            = optional(number)
    }), {})
  }))

  validation {
    condition     = length(var.pools) > 0
    error_message = "pools must hold at least one pool."
  }
  # ghrunner_pool's rules, written out (Terraform cannot call the provider's
  # Go): state.PoolNamePattern and state.UsageClasses, which docscheck keeps
  # these equal to.
  validation {
    condition     = alltrue([for name, _ in var.pools : can(regex("^[A-Za-z0-9_-]{1,64}$", name))])
    error_message = "pool names (the keys of pools) must be 1-64 letters, digits, '-' or '_'."
  }
  validation {
    condition     = alltrue([for _, p in var.pools : contains(["spot", "on-demand"], p.usage_class)])
    error_message = "pools[*].usage_class must be spot or on-demand."
  }
  validation {
    condition = alltrue([for _, p in var.pools : p.max_queued_per_repository == null || p.max_provisions_per_repository == null ||
    try(p.max_queued_per_repository <= p.max_provisions_per_repository, false)])
    error_message = "pools[*].max_queued_per_repository must be at most max_provisions_per_repository: a waiting provision is in flight."
  }
  # The scale set rules of ghrunner_pool (state.ScaleSetNamePattern), and one
  # it cannot check: a pool sees no other pool, the module sees them all.
  validation {
    condition     = alltrue([for _, p in var.pools : p.scale_set == null || try(can(regex("^[A-Za-z0-9][A-Za-z0-9._-]{0,44}$", p.scale_set.name)), false)])
    error_message = "pools[*].scale_set.name must be 1-45 letters, digits, '-', '_' or '.', starting with a letter or digit (a runs-on label; at most 45 like ARC's runnerScaleSetName)."
  }
  validation {
    condition = alltrue([for _, p in var.pools : p.scale_set == null || try(p.scale_set.max_runners == null, false) ||
    try(p.scale_set.max_runners >= 1 && p.scale_set.max_runners <= p.max_instances, false)])
    error_message = "pools[*].scale_set.max_runners must be 1 to the pool's max_instances: each runner of the scale set is an instance of the pool."
  }
  validation {
    condition     = alltrue([for _, p in var.pools : p.scale_set == null || p.registration == "jit"])
    error_message = "pools[*].scale_set needs registration = \"jit\" (the default): a scale set's runners are just-in-time runners."
  }
  validation {
    condition = length(distinct([for _, p in var.pools : "${lower(p.owner)}#${lower(p.scale_set.name)}" if p.scale_set != null])) == length(
    [for _, p in var.pools : p if p.scale_set != null])
    error_message = "pools[*].scale_set.name must differ between the pools of one owner (compared case-insensitively, as runs-on compares labels): two pools serving one scale set would take each other's jobs."
  }
}

variable "architecture" {
  description = "CPU architecture of the functions: arm64 (cheaper) or amd64."
  type        = string
  default     = "arm64"

  validation {
    condition     = contains(["arm64", "amd64"], var.architecture)
    error_message = "architecture must be arm64 or amd64."
  }
}

variable "log_retention_days" {
  description = "Retention of the functions' and the pools' log groups, in days."
  type        = number
  default     = 30
}

variable "refresh_schedule" {
  description = "When refresh runs (expired leases, health, reconciliation): an EventBridge Scheduler rate() or cron() expression."
  type        = string
  default     = "rate(1 minute)"
}

variable "scale_down_schedule" {
  description = "When the two-phase scale-down runs: an EventBridge Scheduler rate() or cron() expression."
  type        = string
  default     = "rate(5 minutes)"
}

variable "schedule_time_zone" {
  description = "Time zone of cron() schedules (IANA name)."
  type        = string
  default     = "UTC"
}

variable "point_in_time_recovery" {
  description = "Enable point-in-time recovery on the state table."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags added to everything the module creates (on top of the provider's default_tags)."
  type        = map(string)
  default     = {}
}

variable "invoker_repositories" {
  description = "Repositories (owner/name) whose workflows may invoke provision and release through GitHub's OIDC tokens: the module then makes the role they assume (output invoker_role_arn). Empty: no role; grant lambda:InvokeFunction yourself."
  type        = list(string)
  default     = []
}

variable "create_oidc_provider" {
  description = "With invoker_repositories, also create the account's IAM OIDC identity provider for GitHub's tokens when it does not exist (one that exists is used and never deleted)."
  type        = bool
  default     = false
}

variable "oidc_issuer" {
  description = "Issuer of the Actions tokens, without https://: token.actions.githubusercontent.com for github.com, <host>/_services/token for GitHub Enterprise Server. The invoker role trusts it, and provision and release verify the invoking job's token (payload field idToken) against its keys."
  type        = string
  default     = "token.actions.githubusercontent.com"
}

variable "oidc_audience" {
  description = "Audience the invoking job requests its OIDC token with (the action's audience input); provision and release refuse a token without it. Keep it different from sts.amazonaws.com."
  type        = string
  default     = "ghrunner"
}

variable "function_vpc" {
  description = "Run the five functions in a VPC (e.g. to reach a GitHub Enterprise Server on a private network): subnet_ids and security_group_ids. The subnets need a route to GitHub and to the AWS APIs (NAT, or VPC endpoints for DynamoDB, EC2, SQS, SSM, STS and CloudWatch Logs). Null: no VPC."
  type = object({
    subnet_ids         = list(string)
    security_group_ids = list(string)
  })
  default = null
}

variable "monitoring" {
  description = "A CloudWatch dashboard named after prefix and alarms (ghrunner_monitoring): per pool, failed provisions, stuck runs, a runner version GitHub will refuse within a week and a pool-miss ratio above pool_miss_ratio_threshold; refresh repairs; failing refresh or scale-down runs; each function's failed invocations that died before writing a metric of ours (AWS/Lambda Errors less ours; a refused payload pages no one); GitHub's rate limit below github_rate_limit_threshold; per pool with a scale_set, the listener polling nothing of its scale set for 2 minutes. alarm_topic_arn: an SNS topic the alarms notify when they fire and when they clear; or alarm_emails: the module makes that topic (<prefix>-alarms, ghrunner_alarm_topic) and subscribes these addresses (each confirms by mail). With neither the alarms notify no one, and plan warns. A failed refresh or scale-down run is not sent to the topic (a GitHub outage fails refresh every minute): the alarm on three failing periods in a row is. Null: no dashboard and no alarms."
  type = object({
    alarm_topic_arn             = optional(string)
    alarm_emails                = optional(list(string), [])
    pool_miss_ratio_threshold   = optional(number, 0.5)
    github_rate_limit_threshold = optional(number, 500)
  })
  default = {}

  validation {
    condition     = var.monitoring == null || try(var.monitoring.alarm_topic_arn, null) == null || length(try(var.monitoring.alarm_emails, [])) == 0
    error_message = "monitoring: set alarm_topic_arn (your topic) or alarm_emails (a topic the module makes), not both."
  }
}

variable "provision_reserved_concurrency" {
  description = "Reserved concurrency of the provision function; null: none (it shares the account's unreserved concurrency). When set, every pool must set max_provisions_per_repository and their sum must stay below it, so that no one repository can hold every execution of provision (plan fails otherwise)."
  type        = number
  default     = null

  validation {
    condition     = var.provision_reserved_concurrency == null || try(var.provision_reserved_concurrency >= 1, false)
    error_message = "provision_reserved_concurrency must be at least 1 (or null for none)."
  }
}

variable "listener" {
  description = "The scale-set listener (ghrunner_listener), made when any pool has a scale_set: one ECS service on Fargate. subnet_ids and security_group_ids default to those of the first pool (by name) with a scale_set, whose instances already reach GitHub and the AWS APIs from there; Fargate gives no public IP unless assign_public_ip is true, whatever the subnet's setting, so public subnets without NAT need it. cpu and memory are a Fargate task size (256/512 by default); cluster_arn runs it in a cluster of yours (unset: the provider makes ghr-<environment>); image_uri runs an image of yours instead of the one the provider builds from its bundle."
  type = object({
    subnet_ids         = optional(list(string))
    security_group_ids = optional(list(string))
    assign_public_ip   = optional(bool, false)
    cpu                = optional(number, 256)
    memory             = optional(number, 512)
    log_level          = optional(string, "info")
    cluster_arn        = optional(string)
    image_uri          = optional(string)
  })
  default  = {}
  nullable = false
}
