# A topic for ghrunner's alarms when the team has none: each address gets
# a confirmation mail, and alarms reach it once confirmed.
resource "ghrunner_alarm_topic" "ci" {
  name            = "ghrunner-prod-alarms"
  email_addresses = ["ci-oncall@example.com"]
}

resource "ghrunner_monitoring" "ci" {
  name            = "ghrunner-prod"
  pools           = ["linux"]
  alarm_topic_arn = ghrunner_alarm_topic.ci.arn
}
