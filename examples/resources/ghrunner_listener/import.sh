# The listener is imported by the deployment's environment (the provider's).
terraform import ghrunner_listener.this prod
