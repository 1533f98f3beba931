output "function_names" {
  description = "Function names by handler (provision, release, refresh, scale-down, jit); workflows invoke provision and release."
  value       = { for h, f in ghrunner_function.fn : h => f.name }
}

output "function_arns" {
  description = "Function ARNs by handler; grant the workflows' role lambda:InvokeFunction on provision and release."
  value       = { for h, f in ghrunner_function.fn : h => f.arn }
}

output "table_name" {
  description = "Name of the state table."
  value       = ghrunner_table.state.name
}

output "queue_names" {
  description = "Pool queue names by pool."
  value       = { for p, q in ghrunner_queue.pool : p => q.name }
}

output "queue_urls" {
  description = "Pool queue URLs by pool."
  value       = { for p, q in ghrunner_queue.pool : p => q.url }
}

output "launch_template_ids" {
  description = "Launch template ids by pool."
  value       = { for p, pool in ghrunner_pool.pool : p => pool.launch_template_id }
}

output "schedule_names" {
  description = "Schedule names by handler (refresh, scale-down)."
  value       = { for h, s in ghrunner_schedule.scheduled : h => s.name }
}

output "invoker_role_arn" {
  description = "The role workflows of invoker_repositories assume (role-to-assume of ghrunner's action, action/) to invoke provision and release; null without invoker_repositories."
  value       = one(ghrunner_invoker_role.workflows[*].arn)
}

output "dashboard_name" {
  description = "The CloudWatch dashboard of the deployment's metrics; null without monitoring."
  value       = one(ghrunner_monitoring.this[*].name)
}

output "alarm_names" {
  description = "The deployment's CloudWatch alarms; empty without monitoring."
  value       = flatten(ghrunner_monitoring.this[*].alarm_names)
}

output "log_groups" {
  description = "The pools' log groups by pool: each instance's agent log (stream <instance id>/agent) and user data output (<instance id>/user-data)."
  value       = { for p, pool in ghrunner_pool.pool : p => pool.log_group }
}

output "alarm_topic_arn" {
  description = "The topic the alarms notify: monitoring.alarm_topic_arn, or the one the module made for monitoring.alarm_emails; null for none."
  value       = local.alarm_topic_arn
}

output "listener_service_arn" {
  description = "ARN of the scale-set listener's ECS service (null when no pool has a scale_set)."
  value       = one(ghrunner_listener.this[*].service_arn)
}
