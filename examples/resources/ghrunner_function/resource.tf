resource "ghrunner_function" "provision" {
  name             = "ci-provision"
  handler          = "provision"
  table            = ghrunner_table.state.name
  github_parameter = "/ghrunner/github"
  queue_arns       = [ghrunner_queue.linux.arn]
}

resource "ghrunner_function" "scale_down" {
  name             = "ci-scale-down"
  handler          = "scale-down" # one run at a time, through a lease in the table
  table            = ghrunner_table.state.name
  github_parameter = "/ghrunner/github"
}
