terraform import ghrunner_pool.example ci-state:linux
