# A function is imported by its name.
terraform import ghrunner_function.provision ci-provision
