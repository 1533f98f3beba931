# A dashboard of the functions' metrics and the alarms a platform team
# pages on, for the pools of the provider's environment.
resource "ghrunner_monitoring" "ci" {
  name  = "ghrunner-prod"
  pools = ["linux", "linux-arm"]

  # Optional: where the alarms go when they fire and when they clear.
  alarm_topic_arn = "arn:aws:sns:eu-west-1:123456789012:ci-pages"

  # Alarm when more than a third of the runners a pool gave in an hour
  # had to be launched rather than reused.
  pool_miss_ratio_threshold = 0.33
}
