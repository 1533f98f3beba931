# The state table of a deployment: one per deployment, shared by its pools.
resource "ghrunner_table" "state" {
  name                   = "ghrunner-prod-state"
  point_in_time_recovery = true

  # Merged over ghr:environment and the provider's default_tags; a tag changed
  # outside Terraform shows in the next plan.
  tags = {
    owner = "platform-team"
  }
}
