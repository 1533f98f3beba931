locals {
  # jit answers the agents' requests for just-in-time runners, from the table's stream.
  handlers = toset(["provision", "jit", "release", "refresh", "scale-down"])
  # Handlers the schedules run; provision and release are invoked by workflows.
  scheduled = {
    refresh    = var.refresh_schedule
    scale-down = var.scale_down_schedule
  }
}

resource "ghrunner_table" "state" {
  name                   = "${var.prefix}-state"
  stream                 = true
  point_in_time_recovery = var.point_in_time_recovery
  tags                   = var.tags
}

resource "ghrunner_queue" "pool" {
  for_each = var.pools

  name = "${var.prefix}-${each.key}"
  tags = var.tags

  lifecycle {
    # SQS names hold 80 characters; prefix and pool name each pass their
    # own rule yet together may not.
    precondition {
      condition     = length("${var.prefix}-${each.key}") <= 80
      error_message = "pool ${each.key}: its queue name ${var.prefix}-${each.key} is over SQS's 80 characters; use a shorter pool name or prefix."
    }
  }
}

resource "ghrunner_pool" "pool" {
  for_each = var.pools

  name                    = each.key
  table                   = ghrunner_table.state.name
  queue_url               = ghrunner_queue.pool[each.key].url
  owner                   = each.value.owner
  image_id                = each.value.image_id
  image_family            = each.value.image_family
  instance_types          = each.value.instance_types
  subnet_ids              = each.value.subnet_ids
  security_group_ids      = each.value.security_group_ids
  usage_class             = each.value.usage_class
  on_demand_fallback      = each.value.on_demand_fallback
  max_instances           = each.value.max_instances
  root_volume_size        = each.value.root_volume_size
  root_volume_type        = each.value.root_volume_type
  root_volume_iops        = each.value.root_volume_iops
  root_volume_throughput  = each.value.root_volume_throughput
  root_volume_kms_key_arn = each.value.root_volume_kms_key_arn
  agent_path              = each.value.agent_path
  agent_endpoint          = each.value.agent_endpoint
  agent_endpoints         = each.value.agent_endpoints
  proxy                   = each.value.proxy
  stopped                 = each.value.stopped
  pre_runner_script       = each.value.pre_runner_script
  cleanup_script          = each.value.cleanup_script
  runner_group            = each.value.runner_group
  keep_docker_images      = each.value.keep_docker_images
  registration            = each.value.registration
  runner_version          = each.value.runner_version
  runner_tarball_url      = each.value.runner_tarball_url
  runner_tarball_sha256   = each.value.runner_tarball_sha256
  log_retention_days      = var.log_retention_days
  idle_windows            = each.value.idle_windows
  scale_set               = each.value.scale_set
  tags                    = var.tags

  # What the user decides; the control loop's own timings are derived
  # from them by the provider (docs/design.md, Timings).
  timings = each.value.timings

  max_provisions_per_repository = each.value.max_provisions_per_repository
  max_queued_per_repository     = each.value.max_queued_per_repository
}

resource "ghrunner_function" "fn" {
  for_each = local.handlers

  name             = "${var.prefix}-${each.key}"
  handler          = each.key
  table            = ghrunner_table.state.name
  github_parameter = var.github_parameter
  queue_arns       = [for q in ghrunner_queue.pool : q.arn]
  # The launching functions use the pools' root volume keys.
  volume_kms_key_arns = contains(["provision", "refresh"], each.key) ? toset(compact([for p in var.pools : p.root_volume_kms_key_arn])) : null
  architecture        = var.architecture
  log_retention_days  = var.log_retention_days
  tags                = var.tags

  # Provision and release bind each run to the invoking job's OIDC token:
  # the same issuer the invoker role trusts, and an audience of our own.
  # (An issuer given with its scheme is taken as it is: the sandbox's fake
  # GitHub serves http on a loopback address.)
  oidc_issuer   = can(regex("^https?://", var.oidc_issuer)) ? var.oidc_issuer : "https://${var.oidc_issuer}"
  oidc_audience = var.oidc_audience

  vpc_subnet_ids         = try(var.function_vpc.subnet_ids, null)
  vpc_security_group_ids = try(var.function_vpc.security_group_ids, null)

  # No on-failure destination to the alarm topic: a GitHub outage fails
  # refresh every minute, and the topic would mail every failure. The
  # monitoring alarms on the condition instead (refresh or scale-down
  # failing three 10-minute periods in a row).

  reserved_concurrency = each.key == "provision" ? var.provision_reserved_concurrency : null

  # Functions read the pool configs at run time: deploy them after the pools
  # so the first scheduled run already sees every pool.
  depends_on = [ghrunner_pool.pool]

  lifecycle {
    # A provision waits inside the function: with reserved concurrency, one
    # repository must not be able to hold all of it (fair share).
    precondition {
      # No coalesce that can see only nulls: terraform evaluates every
      # operand of ||, and coalesce of nothing but nulls is an error.
      condition = each.key != "provision" || var.provision_reserved_concurrency == null || (
        sum(concat([0], [for p in var.pools : p.max_provisions_per_repository != null ? p.max_provisions_per_repository : coalesce(var.provision_reserved_concurrency, 0)])) < coalesce(var.provision_reserved_concurrency, 0)
      )
      error_message = "provision_reserved_concurrency (${coalesce(var.provision_reserved_concurrency, 0)}) must be more than the sum of the pools' max_provisions_per_repository (a pool without it counts as all of it): otherwise one repository can hold every execution of provision and other repositories' workflows are throttled."
    }
  }
}

# The scale-set listener, when any pool serves a scale set: it holds each
# scale set's session with GitHub and provisions and releases its runs.
locals {
  scale_set_pools = sort([for name, p in var.pools : name if p.scale_set != null])
}

resource "ghrunner_listener" "this" {
  count = length(local.scale_set_pools) > 0 ? 1 : 0

  table               = ghrunner_table.state.name
  github_parameter    = var.github_parameter
  queue_arns          = [for q in ghrunner_queue.pool : q.arn]
  volume_kms_key_arns = toset(compact([for p in var.pools : p.root_volume_kms_key_arn]))
  architecture        = var.architecture
  subnet_ids          = var.listener.subnet_ids != null ? var.listener.subnet_ids : var.pools[local.scale_set_pools[0]].subnet_ids
  # Given subnets without groups: the VPC's default group.
  security_group_ids = var.listener.security_group_ids != null ? var.listener.security_group_ids : (
    var.listener.subnet_ids != null ? null : var.pools[local.scale_set_pools[0]].security_group_ids
  )
  assign_public_ip   = var.listener.assign_public_ip
  cpu                = var.listener.cpu
  memory             = var.listener.memory
  log_level          = var.listener.log_level
  log_retention_days = var.log_retention_days
  cluster_arn        = var.listener.cluster_arn
  image_uri          = var.listener.image_uri
  tags               = var.tags

  # The listener reads the pool configs when it starts.
  depends_on = [ghrunner_pool.pool]
}

resource "ghrunner_schedule" "scheduled" {
  for_each = local.scheduled

  name                = "${var.prefix}-${each.key}"
  function_arn        = ghrunner_function.fn[each.key].arn
  schedule_expression = each.value
  timezone            = var.schedule_time_zone
  description         = "ghrunner ${each.key} of ${var.prefix}"
  tags                = var.tags
}

resource "ghrunner_invoker_role" "workflows" {
  count = length(var.invoker_repositories) > 0 ? 1 : 0

  name                 = var.prefix
  repositories         = var.invoker_repositories
  function_arns        = [ghrunner_function.fn["provision"].arn, ghrunner_function.fn["release"].arn]
  oidc_issuer          = var.oidc_issuer
  create_oidc_provider = var.create_oidc_provider
  tags                 = var.tags
}

# The alarms' topic when the team has none: the module's, with the
# addresses of monitoring.alarm_emails subscribed.
resource "ghrunner_alarm_topic" "alarms" {
  count = length(try(var.monitoring.alarm_emails, [])) > 0 ? 1 : 0

  name            = "${var.prefix}-alarms"
  email_addresses = var.monitoring.alarm_emails
}

locals {
  alarm_topic_arn = try(coalesce(try(var.monitoring.alarm_topic_arn, null), one(ghrunner_alarm_topic.alarms[*].arn)), null)
}

# A CloudWatch dashboard of the functions' metrics and the alarms a
# platform team pages on, named after the prefix.
resource "ghrunner_monitoring" "this" {
  count = var.monitoring == null ? 0 : 1

  name                        = var.prefix
  pools                       = sort(keys(var.pools))
  alarm_topic_arn             = local.alarm_topic_arn
  pool_miss_ratio_threshold   = var.monitoring.pool_miss_ratio_threshold
  github_rate_limit_threshold = var.monitoring.github_rate_limit_threshold
  # Each pool with a scale set: the listener's polls of its session
  # stopping alarms.
  scale_set_pools = sort([for n, p in var.pools : n if p.scale_set != null])
  # Lambda's own count of each function's failed invocations, less ours:
  # the ones that die before writing a metric of ours.
  functions = { for h, f in ghrunner_function.fn : h => f.name }
}
