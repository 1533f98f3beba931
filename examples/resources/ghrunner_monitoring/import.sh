# Monitoring is imported by its dashboard name; the pools and thresholds are
# read back from its alarms.
terraform import ghrunner_monitoring.ci ghrunner-prod
