# A pool is imported as <table>:<pool>: the state table holding its settings and its name.
terraform import ghrunner_pool.linux ci-state:linux
