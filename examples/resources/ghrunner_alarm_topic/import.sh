# The topic ARN.
terraform import ghrunner_alarm_topic.ci arn:aws:sns:eu-west-1:123456789012:ghrunner-prod-alarms
