# Runs the deployment's refresh function every minute (the module's default).
# Scheduler assumes a role of its own (ghr-<environment>-<region>-sched-refresh)
# that may invoke only this function; the target is never retried and the time window is off. Runs do
# not overlap: a firing that finds the previous run going returns at once.
resource "ghrunner_schedule" "refresh" {
  name                = "ghrunner-prod-refresh"
  function_arn        = "arn:aws:lambda:eu-west-1:123456789012:function:ghrunner-prod-refresh"
  schedule_expression = "rate(1 minute)"
  payload             = jsonencode({ mode = "refresh" })
  description         = "Expired leases, stale heartbeats, EC2 reconciliation"
}

# Scale-down every 5 minutes, read in the pools' time zone.
resource "ghrunner_schedule" "scale_down" {
  name                = "ghrunner-prod-scale-down"
  function_arn        = "arn:aws:lambda:eu-west-1:123456789012:function:ghrunner-prod-scale-down"
  schedule_expression = "cron(0/5 * * * ? *)"
  timezone            = "Europe/Berlin"
  enabled             = true

  tags = {
    owner = "platform-team"
  }
}
