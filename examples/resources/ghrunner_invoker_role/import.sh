# An invoker role is imported by its short name (the role is
# ghr-<environment>-<region>-invoke-<name>).
terraform import ghrunner_invoker_role.ci ci
