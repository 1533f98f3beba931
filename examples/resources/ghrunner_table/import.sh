# A state table is imported by its name.
terraform import ghrunner_table.state ghrunner-prod-state
