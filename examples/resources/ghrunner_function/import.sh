terraform import ghrunner_function.example ci-provision
