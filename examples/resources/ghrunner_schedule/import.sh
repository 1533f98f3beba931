# A schedule is imported by its name (default schedule group).
terraform import ghrunner_schedule.refresh ghrunner-prod-refresh
