# The scale-set listener of the deployment: one ECS service on Fargate that
# serves every pool with a scale_set.
resource "ghrunner_listener" "this" {
  table              = ghrunner_table.state.name
  github_parameter   = "/ghrunner/github" # a GitHub App's credentials
  queue_arns         = [ghrunner_queue.linux.arn]
  subnet_ids         = ["subnet-0123456789abcdef0"] # private, with a NAT gateway
  security_group_ids = ["sg-0123456789abcdef0"]     # outbound only
}
