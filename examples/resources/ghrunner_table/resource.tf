# The state table of a deployment: one per deployment, shared by its pools.
resource "ghrunner_table" "state" {
  name                   = "ghrunner-prod-state"
  point_in_time_recovery = true

  tags = {
    owner = "platform-team"
  }
}
